import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import { loadConfig, ConfigError } from '../../server/config/config.js';
import { startTestService, type TestService } from '../support/service.js';
import { eventually } from '../support/webhook-receiver.js';

// The Agenda job `provider-events.prune` deletes the inbox entries (provider_events: one per provider
// notification applied, so a repeat changes nothing) past PROVIDER_EVENT_RETENTION (30 days by default,
// what runs here; entries are aged by moving received_at back). Without it the table grew for ever.

let t: TestService;
let key: string;
let n = 0;
const SANDBOX_CREDS = {
  env: 'sandbox', consumer_key: 'inbox-consumer-key', consumer_secret: 'inbox-consumer-secret',
  passkey: 'bfb279f9aa9bdbcf158e97dd71a467cd2e0c893059b10f78e6b72ada1ed2c919', shortcode: '174379',
};

/** A mobile-money payment the simulator's callback completes: one inbox entry, named by the payment. */
async function paidThroughCallback(phone: string): Promise<string> {
  const res = await t.http.post('/v1/payments').set('X-API-Key', key).set('Idempotency-Key', `inbox-${Date.now()}-${++n}`)
    .send({ provider: 'mobilemoney', currency: 'KES', amount: '100', phone }).expect(201);
  const id = res.body.data.id as string;
  await eventually(async () => (await t.sql('SELECT 1 FROM provider_events WHERE payment_id = $1', [id])).length === 1, 15_000, `the callback of ${id} in the inbox`);
  return id;
}
const inboxOf = (ids: string[]) =>
  t.sql<{ payment_id: string }>('SELECT payment_id FROM provider_events WHERE payment_id = ANY($1)', [ids]).then((rows) => rows.map((r) => r.payment_id).sort());

beforeAll(async () => {
  t = await startTestService({ EVENT_PRUNE_INTERVAL: '500ms' });
  ({ apiKey: key } = await t.createMerchant('Inbox Retention Shop'));
  await t.http.put('/v1/merchant/credentials').set('X-API-Key', key).send({ provider: 'mobilemoney', mobilemoney: SANDBOX_CREDS }).expect(200);
});
afterAll(async () => {
  await t.stop();
});

describe('provider notification inbox retention (PROVIDER_EVENT_RETENTION, 30 days by default)', () => {
  it('deletes entries past the retention and keeps recent ones', async () => {
    const old = await paidThroughCallback('254708374149');
    const recent = await paidThroughCallback('254708374150');
    await t.sql(`UPDATE provider_events SET received_at = now() - interval '31 days' WHERE payment_id = $1`, [old]);
    await t.sql(`UPDATE provider_events SET received_at = now() - interval '29 days' WHERE payment_id = $1`, [recent]);

    await eventually(async () => (await inboxOf([old])).length === 0, 15_000, 'the 31-day-old inbox entry to be pruned');
    expect(await inboxOf([old, recent])).toEqual([recent]);
    // The payments themselves are untouched.
    const payments = await t.sql<{ status: string }>('SELECT status FROM payments WHERE id = ANY($1)', [[old, recent]]);
    expect(payments.map((p) => p.status)).toEqual(['completed', 'completed']);
  }, 60_000);

  it('refuses a retention shorter than the providers redeliver for', () => {
    expect(() => loadConfig({ NODE_ENV: 'test', DATABASE_URL: t.databaseUrl, PROVIDER_EVENT_RETENTION: '2d' })).toThrow(ConfigError);
    expect(() => loadConfig({ NODE_ENV: 'test', DATABASE_URL: t.databaseUrl, PROVIDER_EVENT_RETENTION: '2d' })).toThrow(/PROVIDER_EVENT_RETENTION must be at least 4d/);
  });
});
