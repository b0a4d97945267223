import { readFileSync } from 'node:fs';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import { createPaymentsClient, PaymentsApiError, responseOf, type RetryInfo } from '../../client/index.js';
import { KEY_LOCK_POOL_MAX } from '../../server/container.js';
import { startTestService, type TestService } from '../support/service.js';
import { eventually } from '../support/webhook-receiver.js';

/** The SDK against the real service: answers that say something is still running, or was done. */
let t: TestService;
let merchantId: string;
let apiKey: string;

beforeAll(async () => {
  t = await startTestService({ MOBILEMONEY_RECONCILE_INTERVAL: '1s' });
  ({ merchantId, apiKey } = await t.createMerchant('Outcome Shop'));
});
afterAll(async () => {
  await t.stop();
});

const outage = (mode: 'ok' | 'captures_error') => t.http.post('/sandbox/walletpay/_control/outage').send({ mode }).expect(200);

/** A walletpay payment the buyer approved, ready to capture. */
async function approvedOrder(client: ReturnType<typeof createPaymentsClient>, amount: string) {
  const order = await client.payments.create({ provider: 'walletpay', amount, currency: 'USD', return_url: 'https://shop.example.com/return', cancel_url: 'https://shop.example.com/cancel' });
  const approval = order.next_action!.url;
  await fetch(`${approval}${approval.includes('?') ? '&' : '?'}auto=approve`, { redirect: 'manual' });
  return order;
}

const reconcileJobs = () => t.sql(`SELECT id FROM agenda_jobs WHERE name = 'mobilemoney.reconcile' AND data->>'merchantId' = $1`, [merchantId]);

describe('the SDK against the service', () => {
  it('a store of credentials while another store runs is a 409 with Retry-After, retried, then an inProgress error that changed nothing', async () => {
    // Another store of this merchant's cardpay credentials is talking to the provider (its lease row).
    await t.sql(`INSERT INTO refresh_leases (name, holder, until) VALUES ($1, gen_random_uuid(), now() + interval '1 minute')`, [`credentials:${merchantId}:cardpay`]);
    const retries: RetryInfo[] = [];
    const client = createPaymentsClient({ baseUrl: t.baseUrl, apiKey, onRetry: (r) => retries.push(r) });
    const error = await client.merchant.storeCredentials({ provider: 'cardpay', cardpay: { secret_key: 'sk_test_outcome_0001' } }).catch((e: unknown) => e);
    expect(error).toBeInstanceOf(PaymentsApiError);
    expect(error).toMatchObject({ status: 409, code: 'CONFLICT', inProgress: true, mayHaveSucceeded: false, earlierAttemptMayHaveSucceeded: false });
    expect((error as PaymentsApiError).headers.get('retry-after')).toBe('1');
    expect(retries.map((r) => [r.status, r.delayMs])).toEqual([[409, 1000], [409, 1000]]);
    expect(await client.merchant.listCredentials()).toEqual([]);

    // Once that store is over, the same call stores.
    await t.sql('DELETE FROM refresh_leases WHERE name = $1', [`credentials:${merchantId}:cardpay`]);
    expect(await client.merchant.storeCredentials({ provider: 'cardpay', cardpay: { secret_key: 'sk_test_outcome_0001' } })).toMatchObject({ provider: 'cardpay' });
  });

  it('a capture walletpay did not answer is a 502 marked Payments-Outcome: unknown, which the SDK reports as may have succeeded; its retry with the key captures once', async () => {
    const client = createPaymentsClient({ baseUrl: t.baseUrl, apiKey, initialRetryDelayMs: 1 });
    await client.merchant.storeCredentials({ provider: 'walletpay', walletpay: { env: 'sandbox', client_id: 'outcome-wallet', client_secret: 'outcome-wallet-secret' } });
    const order = await approvedOrder(client, '31.00');
    // Captures alone fail: the order is read before the capture, and a failed read sends no capture.
    await outage('captures_error');
    let error: unknown;
    try {
      error = await client.payments.capture(order.id).catch((e: unknown) => e);
    } finally {
      await outage('ok');
    }
    expect(error).toBeInstanceOf(PaymentsApiError);
    const apiError = error as PaymentsApiError;
    expect(apiError).toMatchObject({ status: 502, code: 'PROVIDER_ERROR', mayHaveSucceeded: true });
    expect(apiError.headers.get('payments-outcome')).toBe('unknown');
    expect(apiError.message).toContain(`so it may have been carried out: retry with the same idempotencyKey (${apiError.idempotencyKey})`);
    expect((await client.payments.get(order.id)).status).toBe('pending');

    // As the error says: the same key again captures, once.
    const captured = await client.payments.capture(order.id, { idempotencyKey: apiError.idempotencyKey! });
    expect(captured).toMatchObject({ id: order.id, status: 'completed' });
  });

  it('a capture walletpay refused before acting (its credentials refused) is a 502 without Payments-Outcome: it changed nothing', async () => {
    const client = createPaymentsClient({ baseUrl: t.baseUrl, apiKey, initialRetryDelayMs: 1 });
    await client.merchant.storeCredentials({ provider: 'walletpay', walletpay: { env: 'sandbox', client_id: 'outcome-wallet', client_secret: 'outcome-wallet-secret' } });
    const order = await approvedOrder(client, '32.00');
    // The merchant's secret now refused (a rotated key): the token request fails before any capture is sent.
    await client.merchant.storeCredentials({ provider: 'walletpay', walletpay: { env: 'sandbox', client_id: 'outcome-wallet', client_secret: 'bad-secret', webhook_id: 'WH-OUTCOME-1' } });
    await t.http.post('/sandbox/walletpay/_control/expire-tokens').send({ client_id: 'outcome-wallet' }).expect(200);
    const error = await client.payments.capture(order.id).catch((e: unknown) => e);
    expect(error).toBeInstanceOf(PaymentsApiError);
    expect(error).toMatchObject({ status: 502, code: 'PROVIDER_ERROR', mayHaveSucceeded: false });
    expect((error as PaymentsApiError).headers.has('payments-outcome')).toBe(false);
    expect((error as PaymentsApiError).message).not.toContain('may have been carried out');
    expect((await client.payments.get(order.id)).status).toBe('pending');
  });

  it('a delete of credentials whose follow-up fails after the commit answers 200, and the job it left cancels itself', async () => {
    const client = createPaymentsClient({ baseUrl: t.baseUrl, apiKey, initialRetryDelayMs: 1 });
    await client.merchant.storeCredentials({ provider: 'mobilemoney', mobilemoney: { env: 'sandbox', consumer_key: 'outcome-key', consumer_secret: 's', passkey: 'p', shortcode: '888002' } });
    expect(await reconcileJobs()).toHaveLength(1);

    // Every connection of the advisory-lock pool is busy: unscheduling the job cannot get one (the pool's
    // 10 s wait runs out), after the row was deleted.
    let release!: () => void;
    const busy = new Promise<void>((resolve) => (release = resolve));
    const { keyLock } = t.service.container;
    const holders = Array.from({ length: KEY_LOCK_POOL_MAX }, (_, i) => keyLock.withLock(`test-hold-${i}`, 1_000, () => busy));
    let result: unknown;
    try {
      result = await client.merchant.deleteCredentials('mobilemoney').catch((e: unknown) => e);
    } finally {
      release();
      await Promise.all(holders);
    }
    // Was a 503 ("nothing was done"), whose retry was told 404: NOT_FOUND thrown for a delete that happened.
    expect(result).toEqual({ provider: 'mobilemoney', deleted: true });
    expect(responseOf(result)).toMatchObject({ status: 200 });
    expect(responseOf(result)?.alreadyDeleted).toBeUndefined();
    expect((await client.merchant.listCredentials()).map((c) => c.provider)).not.toContain('mobilemoney');
    const log = readFileSync(path.resolve('test-results', 'logs', `${new URL(t.databaseUrl).pathname.slice(1)}.log`), 'utf8');
    expect(log).toContain('credentials deleted; unscheduling their jobs failed');

    // The job the failed unscheduling left finds no credentials at its next run and removes itself.
    await eventually(async () => (await reconcileJobs()).length === 0, 15_000, 'the orphaned reconciliation job to cancel itself');
    // Stored again, the merchant has its job again.
    await client.merchant.storeCredentials({ provider: 'mobilemoney', mobilemoney: { env: 'sandbox', consumer_key: 'outcome-key', consumer_secret: 's', passkey: 'p', shortcode: '888002' } });
    expect(await reconcileJobs()).toHaveLength(1);
  }, 60_000);
});
