import { readFileSync } from 'node:fs';
import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import { inProcessLogFile } from '../support/secret-audit.js';
import { startTestService, type TestService } from '../support/service.js';
import { eventually } from '../support/webhook-receiver.js';

/**
 * Issue 10, point 1, for the automatic reconciliation (the Agenda job `mobilemoney.reconcile`, not
 * POST …/reconcile): a settled transaction that quotes a pending payment's reference with another
 * amount settles nothing — the payment shows the mismatch, the audit keeps it, the job's report counts
 * it as mismatched — and the operator's true amount, on a later run, settles the payment.
 */

let t: TestService;

beforeAll(async () => {
  t = await startTestService({ MOBILEMONEY_RECONCILE_INTERVAL: '1s', SANDBOX_CALLBACK_DELAY_MS: '50', STATUS_SYNC_SCHEDULE: '1h' });
});
afterAll(async () => {
  await t.stop();
});

/** The job's report lines in this service's log (the operator's view of each run). */
function jobReports(merchantId: string): { pulled: number; updated: number; mismatched: number }[] {
  const logFile = inProcessLogFile(t.databaseUrl);
  return readFileSync(logFile, 'utf8').split('\n').filter(Boolean).map((line) => JSON.parse(line) as Record<string, unknown>)
    .filter((l) => l.msg === 'automatic mobilemoney reconciliation' && l.merchantId === merchantId) as never;
}

describe('automatic reconciliation', () => {
  it('a pulled transaction with another amount settles nothing and is reported; the true amount settles the payment', async () => {
    const m = await t.createMerchant('Job Reconciled');
    await t.http.post('/sandbox/mobilemoney/_control/misreport').send({ amount: 1 }).expect(200);
    await t.http.put('/v1/merchant/credentials').set('X-API-Key', m.apiKey)
      .send({ provider: 'mobilemoney', mobilemoney: { env: 'sandbox', consumer_key: 'job-key', consumer_secret: 's', passkey: 'p', shortcode: '888002' } }).expect(200);
    // No callback ever for this phone: only the operator's list of settled transactions knows it was paid.
    const created = await t.http.post('/v1/payments').set('X-API-Key', m.apiKey).set('Idempotency-Key', `job-${Date.now()}`)
      .send({ provider: 'mobilemoney', amount: '10000', currency: 'KES', phone: '254700000003' });
    const id = created.body.data.id as string;
    expect(created.body.data.status).toBe('pending');

    const get = async () => (await t.http.get(`/v1/payments/${id}`).set('X-API-Key', m.apiKey)).body.data;
    await eventually(async () => ((await get()).integrity.status === 'mismatch' ? true : null), 20_000, 'the job to meet the lying transaction');
    await eventually(() => (jobReports(m.merchantId).some((r) => r.mismatched >= 1) ? true : null), 10_000, 'a job report counting the mismatch');
    expect(await get()).toMatchObject({
      status: 'pending',
      integrity: { status: 'mismatch', mismatches: [{ source: 'reconciliation', expected_amount: '10000.00', expected_currency: 'KES', reported_amount: '1.00', reported_currency: 'KES' }] },
    });
    expect(await t.sql('SELECT type FROM events WHERE payment_id = $1', [id])).toEqual([]);

    await t.http.post('/sandbox/mobilemoney/_control/misreport').send({}).expect(200);
    await eventually(async () => ((await get()).status === 'completed' ? true : null), 20_000, 'the job to settle the payment');
    expect(await t.sql(`SELECT trigger, accepted, expected_amount_minor::text AS expected, reported_amount_minor::text AS reported FROM payment_transitions
      WHERE payment_id = $1 AND to_status = 'completed' ORDER BY id`, [id])).toEqual([
      { trigger: 'reconciliation', accepted: false, expected: '1000000', reported: '100' },
      { trigger: 'reconciliation', accepted: true, expected: null, reported: null },
    ]);
    // The job logs its report after the run, once the payment is committed: waited for, not read at once.
    await eventually(() => (jobReports(m.merchantId).some((r) => r.updated === 1) ? true : null), 10_000, 'a job report counting the settlement');
    expect(await t.sql('SELECT type FROM events WHERE payment_id = $1', [id])).toEqual([{ type: 'payment.completed' }]);
  });
});
