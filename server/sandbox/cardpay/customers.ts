import { newId, nowSec } from './db.js';
import { invalidRequest, noSuch } from './errors.js';
import type { ApiRoutes } from './http.js';
import { ok } from './http.js';
import type { CustomerRow } from './objects.js';
import { customerObject } from './objects.js';
import { metadata, onlyKnown, optInt, optString, reqString } from './params.js';
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
  // Before /v1/customers/:id, which would take `search` for an id.
  api.get('/v1/customers/search', async ({ params, db, account }) => {
    const { sql, args } = parseCustomerSearch(reqString(params, 'query'));
    const limit = Number(optInt(params, 'limit') ?? 10n);
    const rows = await db.query<CustomerRow>(
      `SELECT * FROM sandbox_cardpay_customers WHERE account = ? AND ${sql} ORDER BY created DESC, id DESC LIMIT ?`,
      [account, ...args, Math.min(Math.max(limit, 1), 100)],
    );
    return { object: 'search_result', data: rows.map(customerObject), has_more: false, next_page: null, url: '/v1/customers/search' };
  });
  /** Deleted for good (the simulator keeps no deleted customer to read back); its payment methods are detached with it. */
  api.delete('/v1/customers/:id', async ({ db, account, path }) => {
    const deleted = await db.query<CustomerRow>('DELETE FROM sandbox_cardpay_customers WHERE id = ? AND account = ? RETURNING *', [path.id, account]);
    if (deleted.length === 0) throw noSuch('customer', path.id!);
    await db.query('UPDATE sandbox_cardpay_payment_methods SET customer = NULL, detached = true WHERE customer = ? AND account = ?', [path.id, account]);
    return ok({ id: path.id, object: 'customer', deleted: true }, [{ type: 'customer.deleted', object: customerObject(deleted[0]!) }]);
  });
  api.get('/v1/customers/:id', async ({ db, account, path }) => {
    const row = await findCustomer(db, account, path.id!);
    if (!row) throw noSuch('customer', path.id!);
    return customerObject(row);
  });
}

/**
 * Stripe's search language for customers, the subset the service uses: `metadata['k']:'v'` and
 * `email:'…'` clauses joined by AND. Stripe's index trails writes (docs.stripe.com/search); the
 * simulator's does not.
 */
function parseCustomerSearch(query: string): { sql: string; args: unknown[] } {
  const clauses = query.split(/\s+AND\s+/i).map((c) => c.trim()).filter(Boolean);
  if (clauses.length === 0) throw invalidRequest('Missing required param: query.', 'query');
  const sql: string[] = [];
  const args: unknown[] = [];
  for (const clause of clauses) {
    const meta = /^metadata\[['"]([^'"]+)['"]\]:['"]([^'"]*)['"]$/.exec(clause);
    const email = /^email:['"]([^'"]*)['"]$/.exec(clause);
    if (meta) {
      sql.push('metadata ->> ? = ?');
      args.push(meta[1], meta[2]);
    } else if (email) {
      sql.push('email = ?');
      args.push(email[1]);
    } else {
      throw invalidRequest(`Invalid search query: ${clause}`, 'query');
    }
  }
  return { sql: sql.join(' AND '), args };
}
