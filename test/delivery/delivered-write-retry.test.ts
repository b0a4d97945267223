import { readFileSync } from 'node:fs';
import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import pg from 'pg';
import { inProcessLogFile } from '../support/secret-audit.js';
import { startTestService, type TestService } from '../support/service.js';
import { attemptsOf, delivery, emitEvent, registerWebhook } from './events.js';
import { WebhookReceiver, waitFor } from './receiver.js';

/**
 * Successful attempts are recorded in groups, one statement each. That statement failing once — here
 * its database connection is terminated while it waits — must not fail the group: the write is tried
 * again, so a delivery the receiver answered 2xx is recorded delivered, not POSTed again once its lease
 * expires (its timeout + 30 s).
 */

let t: TestService;
let receiver: WebhookReceiver;

beforeAll(async () => {
  receiver = await new WebhookReceiver().start();
  t = await startTestService({ WEBHOOK_TIMEOUT_MS: '30000' });
});
afterAll(async () => {
  await t.stop();
  await receiver.stop();
});

describe('a failed write of delivered attempts', () => {
  it('the connection recording a 2xx is terminated mid-write: the delivery ends delivered with one attempt, and the receiver got one POST', async () => {
    const m = await t.createMerchant('Shop write-retry');
    await registerWebhook(t, m.apiKey, receiver.url('/write-retry'));
    const release = receiver.holdNext('/write-retry');
    const { deliveryId } = await emitEvent(t, m.merchantId);
    await waitFor(async () => receiver.on('/write-retry').length === 1, 'the attempt at the endpoint');

    // The test locks the delivery's row, so the write of the 2xx waits on it; then its connection is cut.
    const locker = new pg.Client({ connectionString: t.databaseUrl });
    await locker.connect();
    try {
      await locker.query('BEGIN');
      await locker.query('SELECT 1 FROM webhook_deliveries WHERE id = $1 FOR UPDATE', [deliveryId]);
      release(200);
      const [writer] = await waitFor(async () => {
        const rows = await t.sql<{ pid: number }>(
          `SELECT pid FROM pg_stat_activity WHERE datname = current_database() AND wait_event_type = 'Lock' AND query LIKE '%jsonb_to_recordset%'`);
        return rows.length === 1 ? rows : null;
      }, 'the write of the 2xx waiting on the row lock');
      expect((await t.sql<{ done: boolean }>('SELECT pg_terminate_backend($1) AS done', [writer!.pid]))[0]!.done).toBe(true);
    } finally {
      await locker.query('ROLLBACK').catch(() => undefined);
      await locker.end();
    }

    // Well before the lease (30 s + 30 s) could expire and the delivery be sent again.
    const done = await waitFor(async () => {
      const d = await delivery(t, deliveryId);
      return d.status === 'delivered' ? d : null;
    }, 'the delivery delivered', 15_000);
    expect(done).toMatchObject({ attempts: 1, last_response_status: 200, lease_until: null });
    expect((await attemptsOf(t, deliveryId)).map((a) => [a.attempt_number, a.trigger, a.response_status])).toEqual([[1, 'scheduled', 200]]);
    expect(receiver.on('/write-retry')).toHaveLength(1);

    const log = readFileSync(inProcessLogFile(t.databaseUrl), 'utf8').split('\n').filter(Boolean).map((l) => JSON.parse(l) as { msg?: string; level?: number });
    expect(log.filter((l) => l.msg === 'recording delivered webhooks failed; trying again')).toHaveLength(1);
    expect(log.filter((l) => l.msg === 'webhook attempt failed to run')).toEqual([]);
  });
});
