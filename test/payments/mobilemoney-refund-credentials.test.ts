import { readFileSync } from 'node:fs';
import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import { ForwardingStub } from '../support/forwarding-stub.js';
import { behindOperatorStub, statusQueriesSentDuring } from '../support/operator-watch.js';
import { inProcessLogFile } from '../support/secret-audit.js';
import { startTestService, type TestService } from '../support/service.js';
import { eventually } from '../support/webhook-receiver.js';

/**
 * A mobilemoney refund whose stored credentials cannot send a reversal. The contract lets a merchant store
 * live credentials without `initiator`, and without both `initiator_password` and `security_credential`
 * (interface.md: they are needed for reversals); such a refund is the merchant's 422 VALIDATION_ERROR naming
 * the field, with nothing written, sent or told (was: 502 PROVIDER_ERROR, a failed refund and refund.failed).
 * A service not configured for them (no live operator certificate to encrypt the password with) answers
 * 503 with Retry-After, makes no refund and logs an error for its operator. A check-status by receipt (a
 * transaction-status query, which needs the same initiator) is answered exactly so, with no query recorded
 * or sent (was: 502 PROVIDER_ERROR, the certificate's setting named to the merchant).
 */
const SANDBOX_CREDS = {
  env: 'sandbox', consumer_key: 'refund-creds-key', consumer_secret: 'refund-creds-secret',
  passkey: 'bfb279f9aa9bdbcf158e97dd71a467cd2e0c893059b10f78e6b72ada1ed2c919', shortcode: '174379',
};
const LIVE_CREDS = { ...SANDBOX_CREDS, env: 'live', consumer_key: 'refund-creds-live-key' };

let t: TestService;
let key: string;
let n = 0;

beforeAll(async () => {
  t = await startTestService({ MOBILEMONEY_RECONCILE_INTERVAL: '1h' });
  ({ apiKey: key } = await t.createMerchant('Refund Credentials Duka'));
});
afterAll(async () => {
  await t.stop();
});

const storeCreds = (creds: Record<string, unknown>) =>
  t.http.put('/v1/merchant/credentials').set('X-API-Key', key).send({ provider: 'mobilemoney', mobilemoney: creds }).expect(200);
const getPayment = async (id: string) => (await t.http.get(`/v1/payments/${id}`).set('X-API-Key', key).expect(200)).body.data;

/** A completed push (its receipt known: the sandbox callback names it), paid under sandbox credentials. */
async function completedPayment(): Promise<{ id: string; provider_ref: string }> {
  await storeCreds(SANDBOX_CREDS);
  await eventually(async () => (await t.sql(`SELECT 1 FROM sandbox_mobilemoney_stk_requests WHERE phone = '254708374149' AND completes_at > now()`)).length === 0, 10_000, 'the earlier prompt closed');
  const res = await t.http.post('/v1/payments').set('X-API-Key', key).set('Idempotency-Key', `refund-creds-${++n}`)
    .send({ provider: 'mobilemoney', currency: 'KES', amount: '100', phone: '254708374149' }).expect(201);
  return eventually(async () => {
    const p = await getPayment(res.body.data.id);
    return p.status === 'completed' ? p : null;
  }, 15_000, 'the push completed');
}

/** Nothing changed for the payment: no refund row, no event but its completion, nothing reversed at the operator. */
async function expectUntouched(payment: { id: string; provider_ref: string }) {
  expect(await t.sql('SELECT id FROM refunds WHERE payment_id = $1', [payment.id])).toEqual([]);
  expect((await t.sql<{ type: string }>('SELECT type FROM events WHERE payment_id = $1', [payment.id])).map((e) => e.type)).toEqual(['payment.completed']);
  expect(await getPayment(payment.id)).toMatchObject({ status: 'completed', amount_refunded: '0.00' });
  expect(await t.sql('SELECT 1 FROM sandbox_mobilemoney_reversals WHERE transaction_id = $1', [payment.provider_ref])).toEqual([]);
}

describe('live credentials that cannot send a reversal', () => {
  it('without initiator: 422 naming mobilemoney.initiator; without initiator_password or security_credential: 422 naming mobilemoney.initiator_password; nothing written or sent', async () => {
    const p = await completedPayment();

    await storeCreds(LIVE_CREDS);
    const noInitiator = await t.http.post('/v1/refunds').set('X-API-Key', key).send({ payment_id: p.id });
    expect(noInitiator.status).toBe(422); // was 502 PROVIDER_ERROR, with the refund failed and refund.failed sent
    expect(noInitiator.body.error).toMatchObject({
      code: 'VALIDATION_ERROR',
      details: [{ field: 'mobilemoney.initiator', issue: expect.stringContaining('is required for reversals with live credentials') }],
    });
    await expectUntouched(p);

    await storeCreds({ ...LIVE_CREDS, initiator: 'apiop' });
    const noPassword = await t.http.post('/v1/refunds').set('X-API-Key', key).set('Idempotency-Key', `refund-creds-refund-${n}`).send({ payment_id: p.id });
    expect(noPassword.status).toBe(422);
    expect(noPassword.body.error.details).toEqual([{ field: 'mobilemoney.initiator_password', issue: expect.stringContaining('or security_credential is required') }]);
    await expectUntouched(p);

    // Complete credentials are not held back: the reversal is sent (the simulator refuses the made-up credential later).
    await storeCreds({ ...LIVE_CREDS, initiator: 'apiop', security_credential: 'c2VjcmV0' });
    const sent = await t.http.post('/v1/refunds').set('X-API-Key', key).send({ payment_id: p.id });
    expect(sent.status).toBe(201);
    expect(sent.body.data).toMatchObject({ status: 'pending', provider_ref: expect.any(String) });
  });

  it('a service with no live operator certificate for the stored password: 503, no refund made, nothing sent, an error logged for the operator', async () => {
    const p = await completedPayment();
    await storeCreds({ ...LIVE_CREDS, initiator: 'apiop', initiator_password: 'live-password' });
    // Behind another base URL than the built-in simulator's, the certificate must be configured (MOBILEMONEY_LIVE_CERT_PATH is not).
    const res = await behindOperatorStub(t, new ForwardingStub(), () => t.http.post('/v1/refunds').set('X-API-Key', key).send({ payment_id: p.id }));
    expect(res.status).toBe(503); // was 502 PROVIDER_ERROR, with the refund failed and refund.failed sent
    expect(res.body.error.code).toBe('SERVICE_UNAVAILABLE');
    expect(res.headers['retry-after']).toBe('1'); // as every other 503 (was: none)
    expect(res.body.error.message).not.toContain('MOBILEMONEY_LIVE_CERT_PATH');
    await expectUntouched(p);
    const logged = readFileSync(inProcessLogFile(t.databaseUrl), 'utf8').split('\n').filter(Boolean)
      .map((line) => JSON.parse(line) as { level: number; reason?: string })
      .filter((l) => l.level >= 50 && l.reason?.includes('MOBILEMONEY_LIVE_CERT_PATH'));
    expect(logged).toHaveLength(1);
  });
});

describe('check-status by receipt with live credentials that cannot send a transaction-status query', () => {
  const checkStatus = (code: string) => t.http.post(`/v1/payments/mobilemoney/check-status/${code}`).set('X-API-Key', key);
  const queriesOf = (code: string) => t.sql('SELECT id FROM provider_status_queries WHERE code = $1', [code]);

  it('without initiator, or without initiator_password and security_credential: 422 naming the field, as a refund; nothing recorded or sent', async () => {
    const p = await completedPayment();

    await storeCreds(LIVE_CREDS);
    const noInitiator = await statusQueriesSentDuring(t, () => checkStatus(p.provider_ref));
    expect(noInitiator.result.status).toBe(422); // was 502 PROVIDER_ERROR
    expect(noInitiator.result.body.error).toMatchObject({
      code: 'VALIDATION_ERROR',
      details: [{ field: 'mobilemoney.initiator', issue: expect.stringContaining('is required for transaction status queries with live credentials') }],
    });
    expect(noInitiator.sent).toEqual([]);

    await storeCreds({ ...LIVE_CREDS, initiator: 'apiop' });
    const noPassword = await statusQueriesSentDuring(t, () => checkStatus(p.provider_ref));
    expect(noPassword.result.status).toBe(422);
    expect(noPassword.result.body.error.details).toEqual([{ field: 'mobilemoney.initiator_password', issue: expect.stringContaining('or security_credential is required') }]);
    expect(noPassword.sent).toEqual([]);
    expect(await queriesOf(p.provider_ref)).toEqual([]);

    // Complete credentials are not held back: the query is recorded and sent.
    await storeCreds({ ...LIVE_CREDS, initiator: 'apiop', security_credential: 'c2VjcmV0' });
    const sent = await statusQueriesSentDuring(t, () => checkStatus(p.provider_ref));
    expect(sent.result.status).toBe(200);
    expect(sent.sent).toEqual([p.provider_ref]);
    expect(await queriesOf(p.provider_ref)).toHaveLength(1);
  });

  it('a service with no live operator certificate for the stored password: 503 with Retry-After naming no setting, nothing recorded or sent, an error logged for the operator', async () => {
    const p = await completedPayment();
    await storeCreds({ ...LIVE_CREDS, initiator: 'apiop', initiator_password: 'live-password' });
    const logFile = inProcessLogFile(t.databaseUrl);
    const loggedBefore = readFileSync(logFile, 'utf8').split('\n').filter(Boolean).length;
    // Behind another base URL than the built-in simulator's, the certificate must be configured (MOBILEMONEY_LIVE_CERT_PATH is not).
    const { result: res, sent } = await statusQueriesSentDuring(t, () => checkStatus(p.provider_ref));
    expect(res.status).toBe(503); // was 502 PROVIDER_ERROR naming MOBILEMONEY_LIVE_CERT_PATH
    expect(res.body.error.code).toBe('SERVICE_UNAVAILABLE');
    expect(res.headers['retry-after']).toBe('1');
    expect(res.body.error.message).not.toContain('MOBILEMONEY_LIVE_CERT_PATH');
    expect(sent).toEqual([]);
    expect(await queriesOf(p.provider_ref)).toEqual([]);
    const logged = readFileSync(logFile, 'utf8').split('\n').filter(Boolean).slice(loggedBefore)
      .map((line) => JSON.parse(line) as { level: number; reason?: string })
      .filter((l) => l.level >= 50 && l.reason?.includes('MOBILEMONEY_LIVE_CERT_PATH'));
    expect(logged).toHaveLength(1);
  });
});
