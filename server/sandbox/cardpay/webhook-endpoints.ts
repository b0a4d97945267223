import { randomBytes } from 'node:crypto';
import { newId, nowSec } from './db.js';
import { invalidRequest, missingParam, noSuch } from './errors.js';
import type { ApiRoutes } from './http.js';
import { ok } from './http.js';
import type { EndpointRow } from './objects.js';
import { endpointObject } from './objects.js';
import { httpUrl, metadata, onlyKnown, optString, reqString, stringArray } from './params.js';

/** Stripe's limit of test-mode endpoints per account. */
const MAX_ENDPOINTS = 16;
const EVENT_TYPE = /^(\*|[a-z_]+(\.[a-z_]+)+)$/;

export function webhookEndpointRoutes(api: ApiRoutes): void {
  api.post('/v1/webhook_endpoints', async ({ params, db, account }) => {
    onlyKnown(params, ['url', 'enabled_events', 'description', 'metadata', 'api_version']);
    const url = httpUrl(reqString(params, 'url'), 'url');
    const events = stringArray(params, 'enabled_events');
    if (!events || events.length === 0) throw missingParam('enabled_events');
    events.forEach((e, i) => {
      if (!EVENT_TYPE.test(e)) throw invalidRequest(`Invalid enabled_events[${i}]: ${e} is not a valid event type`, `enabled_events[${i}]`);
    });
    // Serialise registrations of one account so the limit holds under concurrency.
    await db.query('SELECT pg_advisory_xact_lock(hashtextextended(?, 0))', [`sandbox_cardpay_endpoints:${account}`]);
    const [{ count } = { count: '0' }] = await db.query<{ count: string }>(
      'SELECT count(*)::text AS count FROM sandbox_cardpay_webhook_endpoints WHERE account = ?',
      [account],
    );
    if (Number(count) >= MAX_ENDPOINTS) throw invalidRequest(`You have reached the maximum of ${MAX_ENDPOINTS} test webhook endpoints.`, 'url');
    const [row] = await db.query<EndpointRow>(
      `INSERT INTO sandbox_cardpay_webhook_endpoints (id, account, url, secret, enabled_events, description, metadata, api_version, created)
       VALUES (?, ?, ?, ?, ?::text[], ?, ?::jsonb, ?, ?) RETURNING *`,
      [newId('we'), account, url, `whsec_${randomBytes(24).toString('hex')}`, `{${events.map((e) => `"${e}"`).join(',')}}`,
        optString(params, 'description') ?? null, JSON.stringify(metadata(params)), optString(params, 'api_version') ?? null, nowSec()],
    );
    return ok(endpointObject(row!, true));
  });
  api.get('/v1/webhook_endpoints', async ({ db, account }) => {
    const rows = await db.query<EndpointRow>('SELECT * FROM sandbox_cardpay_webhook_endpoints WHERE account = ? ORDER BY created DESC, id DESC', [account]);
    return { object: 'list', data: rows.map((r) => endpointObject(r)), has_more: false, url: '/v1/webhook_endpoints' };
  });
  api.get('/v1/webhook_endpoints/:id', async ({ db, account, path }) => {
    const [row] = await db.query<EndpointRow>('SELECT * FROM sandbox_cardpay_webhook_endpoints WHERE id = ? AND account = ?', [path.id, account]);
    if (!row) throw noSuch('webhook_endpoint', path.id!);
    return endpointObject(row);
  });
  api.delete('/v1/webhook_endpoints/:id', async ({ db, account, path }) => {
    const deleted = await db.query('DELETE FROM sandbox_cardpay_webhook_endpoints WHERE id = ? AND account = ? RETURNING id', [path.id, account]);
    if (deleted.length === 0) throw noSuch('webhook_endpoint', path.id!);
    return ok({ id: path.id, object: 'webhook_endpoint', deleted: true });
  });
}
