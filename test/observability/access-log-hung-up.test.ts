import http from 'node:http';
import { readFileSync } from 'node:fs';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import { scrapeMetrics, total } from '../support/prometheus.js';
import { startTestService, type TestService } from '../support/service.js';
import { eventually } from '../support/webhook-receiver.js';

// A request whose client hung up still has its one access line and its one metric sample: Node emits
// only 'close' (no 'finish') for an answer ended after its socket closed, so a payment created after its
// client gave up was in neither, and the X-Request-Id the SDK tells the merchant to quote led nowhere.

let t: TestService;
let apiKey: string;
beforeAll(async () => {
  // The simulators answer 1.5 s after acting: the client leaves while the provider call is under way.
  t = await startTestService({ SANDBOX_LATENCY_MS: '1500' });
  ({ apiKey } = await t.createMerchant('Hung-up Shop'));
  await t.http.put('/v1/merchant/credentials').set('X-API-Key', apiKey)
    .send({ provider: 'cardpay', cardpay: { secret_key: 'sk_test_hung_up_log', webhook_secret: 'whsec_hung_up_log' } }).expect(200);
}, 60_000);
afterAll(async () => t.stop());

/** The test service's `request` lines for one request id (it logs to its database's file, synchronously). */
function accessLinesOf(requestId: string): Array<Record<string, unknown>> {
  const file = path.resolve('test-results', 'logs', `${new URL(t.databaseUrl).pathname.slice(1)}.log`);
  return readFileSync(file, 'utf8').split('\n').filter((l) => l.includes(requestId))
    .map((l) => JSON.parse(l) as Record<string, unknown>).filter((l) => l.msg === 'request');
}

const created = async () => total(await scrapeMetrics(t), 'http_requests_total', { method: 'POST', route: '/v1/payments', status: '201' });

describe('a request whose client hung up', () => {
  it('is logged once under its X-Request-Id, marked aborted, with the status its handler answered, and counted once', async () => {
    const before = await created();
    const key = `hung-up-log-${Date.now()}`;
    const requestId = `hung-up-${Date.now()}`;
    const request = http.request(`${t.baseUrl}/v1/payments`, {
      method: 'POST',
      headers: { 'Content-Type': 'application/json', 'X-API-Key': apiKey, 'Idempotency-Key': key, 'X-Request-Id': requestId },
    });
    const cut = new Promise<string>((resolve) => request.once('error', (err: NodeJS.ErrnoException) => resolve(err.code ?? err.message)));
    request.end(JSON.stringify({ provider: 'cardpay', amount: '12.00', currency: 'USD', payment_method: 'pm_card_visa' }));
    // The client gives up once the payment is recorded and its provider call under way.
    await eventually(async () => (await t.sql('SELECT 1 FROM payments WHERE idempotency_key = $1', [key])).length > 0, 10_000, 'the payment row');
    request.destroy();
    expect(await cut).toBe('ECONNRESET');

    await eventually(async () => {
      const [row] = await t.sql<{ status: string }>('SELECT status FROM payments WHERE idempotency_key = $1', [key]);
      return row?.status === 'completed';
    }, 15_000, 'the payment to complete');
    const [line] = await eventually(() => (accessLinesOf(requestId).length > 0 ? accessLinesOf(requestId) : null), 10_000, 'its access line');
    expect(accessLinesOf(requestId)).toEqual([line]);
    expect(line).toMatchObject({ requestId, method: 'POST', route: '/v1/payments', status: '201', aborted: true });
    expect((await created()) - before).toBe(1);
  }, 60_000);
});
