import { newId, nowSec } from './db.js';
import { invalidRequest, noSuch } from './errors.js';
import type { ApiRoutes } from './http.js';
import { ok } from './http.js';
import type { CustomerRow } from './objects.js';
import { customerObject } from './objects.js';
import { metadata, onlyKnown, optString } from './params.js';
import { attachPaymentMethod, paymentMethodToAttach } from './payment-methods.js';
import { findCustomer } from './store.js';

export function customerRoutes(api: ApiRoutes): void {
  /** `payment_method`: attached to the new customer, as by POST /v1/payment_methods/{id}/attach (a decline creates nothing). */
  api.post('/v1/customers', async ({ params, db, account }) => {
    onlyKnown(params, ['email', 'name', 'description', 'metadata', 'phone', 'payment_method']);
    const email = optString(params, 'email') ?? null;
    if (email && (email.length > 512 || !/^[^\s@]+@[^\s@]+$/.test(email))) throw invalidRequest(`Invalid email address: ${email}`, 'email', 'email_invalid');
    const row: CustomerRow = {
      id: newId('cus', 14), account, email, name: optString(params, 'name') ?? null, description: optString(params, 'description') ?? null,
      metadata: metadata(params), created: String(nowSec()),
    };
    const paymentMethod = optString(params, 'payment_method');
    const attached = paymentMethod
      ? await attachPaymentMethod(db, account, paymentMethod, await paymentMethodToAttach(db, account, paymentMethod, 'payment_method'), row.id)
      : null;
    if (attached && attached.status !== 200) return attached;
    db.write(
      'INSERT INTO sandbox_cardpay_customers (id, account, email, name, description, metadata, created) VALUES (?, ?, ?, ?, ?, ?::jsonb, ?)',
      [row.id, row.account, row.email, row.name, row.description, JSON.stringify(row.metadata), row.created],
    );
    const customer = customerObject(row);
    return ok(customer, [{ type: 'customer.created', object: customer }, ...(attached?.events ?? [])]);
  });
  api.get('/v1/customers/:id', async ({ db, account, path }) => {
    const row = await findCustomer(db, account, path.id!);
    if (!row) throw noSuch('customer', path.id!);
    return customerObject(row);
  });
}
