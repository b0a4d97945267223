import { describe, expect, it } from '@jest/globals';
import { createPaymentsClient, PaymentsConnectionError } from '../../client/index.js';

/**
 * The mobile-money operations (checkStatus, reconcile, registerPull) answer only once the operator did: the
 * service may spend several PROVIDER_TIMEOUT_MS on one (a token wait, a reconcile's pages). So do the keyed
 * money-moving calls (payments.create, payments.capture, refunds.create, cards.create): a mobilemoney create
 * waits for the OAuth token, then the push, and on an invalid token both again. Like sendTest's
 * (sdk-events-webhooks.test.ts), their timeout per attempt is at least a floor above the client's timeoutMs
 * (5 and 4 minutes): shown here with a client timeoutMs of 1 s and a fetch that answers after 1.5 s.
 */
const ANSWER_AFTER_MS = 1_500;

/** A fetch that answers every request with `data` after ANSWER_AFTER_MS, or rejects as fetch does when its signal aborts first. */
function slowFetch(data: unknown) {
  const sent: string[] = [];
  const fetch: typeof globalThis.fetch = (input, init) => {
    sent.push(`${init?.method ?? 'GET'} ${new URL(String(input)).pathname}`);
    return new Promise<Response>((resolve, reject) => {
      const timer = setTimeout(() => {
        resolve(new Response(JSON.stringify({ success: true, data }), { status: 200, headers: { 'content-type': 'application/json' } }));
      }, ANSWER_AFTER_MS);
      init?.signal?.addEventListener('abort', () => {
        clearTimeout(timer);
        reject(init.signal!.reason);
      }, { once: true });
    });
  };
  return { fetch, sent };
}

const impatient = (fetch: typeof globalThis.fetch) => createPaymentsClient({ baseUrl: 'http://payments.test', apiKey: 'pk_test_fake', fetch, timeoutMs: 1_000 });

describe('mobile-money operations wait past the client timeoutMs for the operator', () => {
  it('checkStatus, reconcile and registerPull return the answer that came after the client timeoutMs; other calls still time out', async () => {
    // They used the client's timeoutMs (30 s by default) and, never retried, threw "timed out after 30000 ms"
    // while the service went on reconciling.
    const report = { pulled: 0, updated: 0, skipped: 0, not_found: 0, results: [] };
    const { fetch, sent } = slowFetch(report);
    const client = impatient(fetch);
    const started = Date.now();
    const [status, reconciled, registered] = await Promise.all([
      client.mobilemoney.checkStatus('QK12345678'),
      client.mobilemoney.reconcile({}),
      client.mobilemoney.registerPull({}),
    ]);
    expect(Date.now() - started).toBeGreaterThanOrEqual(ANSWER_AFTER_MS - 50);
    expect([status, reconciled, registered]).toEqual([report, report, report]);
    expect(sent).toEqual([
      'POST /v1/payments/mobilemoney/check-status/QK12345678',
      'POST /v1/payments/mobilemoney/reconcile',
      'POST /v1/payments/mobilemoney/register-pull',
    ]);

    // The floor is theirs: another call keeps the client's 1 s.
    const other = await client.merchant.get({ maxRetries: 0 }).catch((e: unknown) => e);
    expect(other).toBeInstanceOf(PaymentsConnectionError);
    expect((other as Error).message).toContain('timed out after 1000 ms');
  });

  it("a call's own timeoutMs still wins", async () => {
    const client = impatient(slowFetch({}).fetch);
    const error = await client.mobilemoney.reconcile({}, { timeoutMs: 500 }).catch((e: unknown) => e);
    expect(error).toBeInstanceOf(PaymentsConnectionError);
    expect((error as Error).message).toContain('timed out after 500 ms');
  });
});

describe('the keyed money-moving calls wait past the client timeoutMs for the provider', () => {
  it('payments.create (mobilemoney), payments.capture, refunds.create and cards.create return the answer that came after the client timeoutMs, once each', async () => {
    // They used the client's timeoutMs (30 s by default): the SDK dropped the attempt while the service went on
    // pushing, retried with the same key into a 409 "still being processed", and threw CONFLICT inProgress for a
    // payment that went through, with no payment id.
    const answer = { id: '4b0b8a52-4f5e-4c1a-9a57-0d6c1f2e3a4b', status: 'pending' };
    const { fetch, sent } = slowFetch(answer);
    const client = impatient(fetch);
    const started = Date.now();
    const results = await Promise.all([
      client.payments.create({ provider: 'mobilemoney', amount: '100', currency: 'KES', phone: '254708374149' }),
      client.payments.capture(answer.id),
      client.refunds.create({ payment_id: answer.id }),
      client.cards.create({ payment_method_id: 'pm_card_visa' }),
    ]);
    expect(Date.now() - started).toBeGreaterThanOrEqual(ANSWER_AFTER_MS - 50);
    expect(results).toEqual([answer, answer, answer, answer]);
    expect(sent).toEqual(['POST /v1/payments', `POST /v1/payments/${answer.id}/capture`, 'POST /v1/refunds', 'POST /v1/payments/cards']);
  });

  it("a call's own timeoutMs still wins", async () => {
    const client = impatient(slowFetch({}).fetch);
    const error = await client.refunds.create({ payment_id: '4b0b8a52-4f5e-4c1a-9a57-0d6c1f2e3a4b' }, { timeoutMs: 500, maxRetries: 0 }).catch((e: unknown) => e);
    expect(error).toBeInstanceOf(PaymentsConnectionError);
    expect((error as Error).message).toContain('timed out after 500 ms');
  });
});
