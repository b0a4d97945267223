import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import { startTestService, type TestService } from '../support/service.js';

/**
 * The per-address callback limit (CALLBACK_RATE_LIMIT_PER_MINUTE) and the mobile-money operator's own
 * addresses (MOBILEMONEY_CALLBACK_ALLOWLIST). The operator does not send a refused callback again: at a
 * sales peak its STK results beyond the limit were answered 429 and lost, their payments left for the
 * status sync and their refunds refused until reconciliation. Its addresses are not counted on the
 * mobile-money callback routes; any other address still is, before anything is looked up, and the card and
 * wallet providers' callbacks (whose providers retry on 429) are counted whatever the address.
 */
const OPERATOR_IP = '196.201.214.200';
const STRANGER_IP = '203.0.113.9';
const LIMIT = 2;

let t: TestService;
beforeAll(async () => {
  // Production, sandbox off (loopback is no operator address), behind a trusted proxy that names the client;
  // nothing here calls a provider (the callbacks name no payment of ours).
  t = await startTestService({
    NODE_ENV: 'production', SANDBOX: 'false', MOBILEMONEY_CALLBACK_ALLOWLIST: OPERATOR_IP,
    TRUST_PROXY: 'loopback', CALLBACK_RATE_LIMIT_PER_MINUTE: String(LIMIT),
  });
});
afterAll(async () => {
  await t.stop();
});

let n = 0;
const stkResult = (from: string) =>
  t.http.post('/v1/webhooks/mobilemoney').set('X-Forwarded-For', from).send({
    Body: { stkCallback: { MerchantRequestID: `m-${++n}`, CheckoutRequestID: `ws_CO_peak_${n}`, ResultCode: 1032, ResultDesc: 'Request cancelled by user' } },
  });
const statuses = async (send: () => Promise<{ status: number }>, count: number) => {
  const seen: number[] = [];
  for (let i = 0; i < count; i++) seen.push((await send()).status);
  return seen;
};

describe('callbacks over CALLBACK_RATE_LIMIT_PER_MINUTE', () => {
  it('from the operator\'s allowlisted address on the mobile-money routes: all accepted, none counted', async () => {
    // Five times the limit (a minute boundary crossed meanwhile would let at most twice the limit through).
    const seen = await statuses(() => stkResult(OPERATOR_IP), 5 * LIMIT);
    expect(seen).toEqual(Array(5 * LIMIT).fill(200)); // was 429 past the limit
    const timeout = await t.http.post('/v1/webhooks/mobilemoney/transactionstatus/timeout').set('X-Forwarded-For', OPERATOR_IP)
      .send({ Result: { ResultType: 1, ResultCode: 1, ResultDesc: 'timeout', OriginatorConversationID: 'x', ConversationID: 'AG_x' } });
    expect(timeout.status).not.toBe(429);
    expect(await t.sql(`SELECT bucket FROM rate_limit_windows WHERE bucket LIKE $1`, [`callback:%${OPERATOR_IP}%`])).toEqual([]);
  });

  it('from any other address: 429 past the limit, before any lookup', async () => {
    const seen = await statuses(() => stkResult(STRANGER_IP), 3 * LIMIT);
    // Refused for its address (401) while within the limit, then 429.
    expect(seen).toContain(429);
    expect(seen.filter((s) => s !== 429)).toEqual(expect.arrayContaining([401]));
    expect(seen.every((s) => s === 401 || s === 429)).toBe(true);
  });

  it('to the card provider\'s route, even from the operator\'s address: 429 past the limit (cardpay retries)', async () => {
    const seen = await statuses(
      () => t.http.post('/v1/webhooks/cardpay').set('X-Forwarded-For', OPERATOR_IP).set('Content-Type', 'application/json').send('{}'),
      3 * LIMIT,
    );
    expect(seen).toContain(429);
  });
});
