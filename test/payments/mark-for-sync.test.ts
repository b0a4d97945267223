import pg from 'pg';
import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import { startTestService, type TestService } from '../support/service.js';
import { eventually } from '../support/webhook-receiver.js';

/**
 * A creation whose outcome is unknown keeps the payment pending "for the status sync" and stores the
 * error as its provider_response. A callback may complete the payment at that very moment: the
 * creation's write must not overwrite what the callback stored. Here a second connection holds the
 * payment's row lock while the creation's write is under way, completes the payment as a callback
 * would, and commits; the creation's write, waiting on that lock, must then change nothing.
 */
let t: TestService;
let key: string;

beforeAll(async () => {
  t = await startTestService();
  ({ apiKey: key } = await t.createMerchant('Mark For Sync Shop'));
  await t.http.put('/v1/merchant/credentials').set('X-API-Key', key)
    .send({ provider: 'cardpay', cardpay: { secret_key: 'sk_test_mark_for_sync_0001', webhook_secret: 'whsec_mark_for_sync_unregistered' } }).expect(200);
});
afterAll(async () => {
  await t.stop();
});

describe('keeping a payment for the status sync while a callback completes it', () => {
  it("leaves the callback's status and stored response alone", async () => {
    const created = await t.http.post('/v1/payments').set('X-API-Key', key).set('Idempotency-Key', `mark-${Date.now()}`)
      .send({ provider: 'cardpay', amount: '12.00', currency: 'USD', payment_method: 'pm_card_threeDSecureRequired' });
    expect(created.body.data.status).toBe('pending');
    const id = created.body.data.id as string;

    const callback = new pg.Client({ connectionString: t.databaseUrl });
    await callback.connect();
    try {
      await callback.query('BEGIN');
      await callback.query('SELECT id FROM payments WHERE id = $1 FOR UPDATE', [id]);
      const marking = t.inContext(() => t.service.container.services.payments.markForSync(id, { error: 'cardpay did not answer in time' }));
      // The creation's write is waiting for the row lock.
      await eventually(async () => {
        const waiting = await t.sql<{ n: number }>(
          `SELECT count(*)::int AS n FROM pg_stat_activity WHERE wait_event_type = 'Lock' AND query ILIKE 'update%payments%' AND datname = current_database()`);
        return waiting[0]!.n > 0;
      }, 10_000, 'the write waiting for the row lock');
      await callback.query(`UPDATE payments SET status = 'completed', provider_response = '{"from":"callback"}'::jsonb WHERE id = $1`, [id]);
      await callback.query('COMMIT');
      await marking;
    } finally {
      await callback.end();
    }
    expect(await t.sql('SELECT status, provider_response FROM payments WHERE id = $1', [id])).toEqual([{ status: 'completed', provider_response: { from: 'callback' } }]);
  });
});
