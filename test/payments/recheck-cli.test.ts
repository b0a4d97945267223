import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import { adminCli, runCli } from '../support/processes.js';
import { TEST_ENCRYPTION_KEY, startTestService, type TestService } from '../support/service.js';
import { eventually } from '../support/webhook-receiver.js';

/**
 * `admin payment recheck` / `admin refund recheck`: after a provider outage longer than
 * STATUS_SYNC_SCHEDULE, the re-checks have given up and the payment or refund stays pending for good;
 * the operator starts them over and the next re-check settles it.
 */
let t: TestService;
let key: string;
let n = 0;

beforeAll(async () => {
  // A schedule that gives up quickly: two re-checks 100 ms apart.
  t = await startTestService({ STATUS_SYNC_SCHEDULE: '100ms,100ms', STATUS_SYNC_POLL_INTERVAL: '100ms' });
  ({ apiKey: key } = await t.createMerchant('Recheck Shop'));
  await t.http.put('/v1/merchant/credentials').set('X-API-Key', key).send({ provider: 'cardpay', cardpay: { secret_key: 'sk_test_recheck_0001' } }).expect(200);
});
afterAll(async () => {
  await t.http.post('/sandbox/cardpay/_control/outage').send({ mode: 'ok' });
  await t.stop();
});

const outage = (mode: 'ok' | 'error') => t.http.post('/sandbox/cardpay/_control/outage').send({ mode }).expect(200);
const admin = (args: string[]) => adminCli<{ restarted: string[] }>(t.databaseUrl, args);
/** Waits until the re-checks of `id` in `table` have run out (no re-check scheduled) while it is still pending. */
const givenUp = (table: 'payments' | 'refunds', id: string) =>
  eventually(async () => {
    const [row] = await t.sql<{ status: string; next_sync_at: Date | null; sync_attempts: number }>(`SELECT status, next_sync_at, sync_attempts FROM ${table} WHERE id = $1`, [id]);
    return row!.status === 'pending' && row!.next_sync_at === null ? row : null;
  }, 15_000, `the re-checks of ${table} ${id} to run out`);
const paymentStatus = async (id: string) => (await t.http.get(`/v1/payments/${id}`).set('X-API-Key', key).expect(200)).body.data.status;

describe('admin payment recheck', () => {
  it('--unresolved starts over the re-checks of payments they gave up on; the next one settles them', async () => {
    await outage('error');
    let id: string;
    try {
      const res = await t.http.post('/v1/payments').set('X-API-Key', key).set('Idempotency-Key', `recheck-${++n}`)
        .send({ provider: 'cardpay', amount: '12.00', currency: 'USD', payment_method: 'pm_card_visa' });
      expect(res.body.data.status).toBe('pending');
      id = res.body.data.id;
      expect((await givenUp('payments', id)).sync_attempts).toBe(2);
    } finally {
      await outage('ok');
    }
    const { restarted } = await admin(['payment', 'recheck', '--unresolved']);
    expect(restarted).toEqual([id]);
    await eventually(async () => ((await paymentStatus(id)) === 'completed' ? true : null), 15_000, 'the payment settled');
    // Nothing is left to restart.
    expect(await admin(['payment', 'recheck', '--unresolved'])).toEqual({ restarted: [] });
  });

  it('--id of a payment that is not pending exits 1 and says so; --id and --unresolved together are a usage error', async () => {
    const done = await t.http.post('/v1/payments').set('X-API-Key', key).set('Idempotency-Key', `recheck-${++n}`)
      .send({ provider: 'cardpay', amount: '3.00', currency: 'USD', payment_method: 'pm_card_visa' });
    expect(done.body.data.status).toBe('completed');
    const env = { DATABASE_URL: t.databaseUrl, ENCRYPTION_KEY: TEST_ENCRYPTION_KEY, NODE_ENV: 'test' };
    const notPending = await runCli('server/admin/cli.ts', ['payment', 'recheck', '--id', done.body.data.id], env);
    expect(notPending.code).toBe(1);
    expect(notPending.stderr).toContain(`no pending payment ${done.body.data.id}`);
    const both = await runCli('server/admin/cli.ts', ['payment', 'recheck', '--id', done.body.data.id, '--unresolved'], env);
    expect(both.code).toBe(64);
    expect(both.stderr).toContain('give --id or --unresolved');
  });
});

describe('admin refund recheck', () => {
  it('--id starts over the re-checks of a refund they gave up on; the next one sends it and it completes', async () => {
    const paid = await t.http.post('/v1/payments').set('X-API-Key', key).set('Idempotency-Key', `recheck-${++n}`)
      .send({ provider: 'cardpay', amount: '20.00', currency: 'USD', payment_method: 'pm_card_visa' });
    await outage('error');
    let refundId: string;
    try {
      const unanswered = await t.http.post('/v1/refunds').set('X-API-Key', key).send({ payment_id: paid.body.data.id, amount: '5.00' });
      expect([unanswered.status, unanswered.body.data.status]).toEqual([201, 'pending']);
      refundId = unanswered.body.data.id;
      await givenUp('refunds', refundId);
    } finally {
      await outage('ok');
    }
    expect(await admin(['refund', 'recheck', '--id', refundId])).toEqual({ restarted: [refundId] });
    const refund = await eventually(async () => {
      const r = (await t.http.get(`/v1/refunds/${refundId}`).set('X-API-Key', key).expect(200)).body.data;
      return r.status === 'completed' ? r : null;
    }, 15_000, 'the refund completed');
    expect(refund.amount).toBe('5.00');
  });
});
