import { newId, nowSec } from './db.js';
import { invalidRequest, noSuch } from './errors.js';
import type { ApiRoutes } from './http.js';
import { ok } from './http.js';
import type { CustomerRow } from './objects.js';
import { customerObject } from './objects.js';
import { metadata, onlyKnown, optString } from './params.js';
import { findCustomer } from './store.js';

export function customerRoutes(api: ApiRoutes): void {
  api.post('/v1/customers', async ({ params, db, account }) => {
    onlyKnown(params, ['email', 'name', 'description', 'metadata', 'phone']);
    const email = optString(params, 'email') ?? null;
    if (email && (email.length > 512 || !/^[^\s@]+@[^\s@]+$/.test(email))) throw invalidRequest(`Invalid email address: ${email}`, 'email', 'email_invalid');
    const row: CustomerRow = {
      id: newId('cus', 14), account, email, name: optString(params, 'name') ?? null, description: optString(params, 'description') ?? null,
      metadata: metadata(params), created: String(nowSec()),
    };
    db.write(
      'INSERT INTO sandbox_cardpay_customers (id, account, email, name, description, metadata, created) VALUES (?, ?, ?, ?, ?, ?::jsonb, ?)',
      [row.id, row.account, row.email, row.name, row.description, JSON.stringify(row.metadata), row.created],
    );
    const customer = customerObject(row);
    return ok(customer, [{ type: 'customer.created', object: customer }]);
  });
  api.get('/v1/customers/:id', async ({ db, account, path }) => {
    const row = await findCustomer(db, account, path.id!);
    if (!row) throw noSuch('customer', path.id!);
    return customerObject(row);
  });
}
