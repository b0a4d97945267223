import { readFileSync } from 'node:fs';
import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import { callbackToken } from '../../server/providers/mobilemoney/callback.js';
import { inProcessLogFile } from '../support/secret-audit.js';
import { startTestService, type TestService } from '../support/service.js';
import { eventually } from '../support/webhook-receiver.js';

/**
 * The addresses the service gives the operator for the results of its reversals and status queries carry
 * a token (HMAC of our id keyed by the passkey): a result posted there with it is believed. The built-in
 * simulator logs where a result it loses or holds (lose-results, hold-results) was going; anyone reading
 * the log must not learn a token that would make a forged result believed.
 */
let t: TestService;
let key: string;
const CREDS = {
  env: 'sandbox', consumer_key: 'log-urls-key', consumer_secret: 'log-urls-secret',
  passkey: 'bfb279f9aa9bdbcf158e97dd71a467cd2e0c893059b10f78e6b72ada1ed2c919', shortcode: '174379',
};

beforeAll(async () => {
  t = await startTestService({ STATUS_SYNC_SCHEDULE: '1h' });
  ({ apiKey: key } = await t.createMerchant('Log Urls Duka'));
  await t.http.put('/v1/merchant/credentials').set('X-API-Key', key).send({ provider: 'mobilemoney', mobilemoney: CREDS }).expect(200);
});
afterAll(async () => {
  await t.http.post('/sandbox/mobilemoney/_control/lose-results').send({ count: 0 });
  await t.http.post('/sandbox/mobilemoney/_control/hold-results').send({ count: 0 });
  await t.sql('DELETE FROM sandbox_held_results');
  await t.stop();
});

const control = async () =>
  (await t.sql<{ lost_results: number; held_results: number }>(`SELECT lost_results, held_results FROM sandbox_controls WHERE provider = 'mobilemoney'`))[0]!;
const logLines = () => readFileSync(inProcessLogFile(t.databaseUrl), 'utf8').split('\n').filter(Boolean);
/** The simulator's log lines with `msg`, once one names `ref`. */
const simulatorLines = (msg: string, ref: string) =>
  eventually(() => {
    const lines = logLines().map((l) => JSON.parse(l) as { msg?: string; url?: string }).filter((l) => l.msg === msg && l.url?.includes(`ref=${ref}`));
    return lines.length ? lines : null;
  }, 15_000, msg);

describe('the mobilemoney simulator logs', () => {
  it("where a lost or held result was going without the address's token", async () => {
    const created = await t.http.post('/v1/payments').set('X-API-Key', key).set('Idempotency-Key', 'log-urls-1')
      .send({ provider: 'mobilemoney', currency: 'KES', amount: '100', phone: '254708374149' }).expect(201);
    const paid = await eventually(async () => {
      const p = (await t.http.get(`/v1/payments/${created.body.data.id}`).set('X-API-Key', key).expect(200)).body.data;
      return p.status === 'completed' ? p : null;
    }, 15_000, 'the push completed');

    // A reversal whose result the simulator loses.
    await t.http.post('/sandbox/mobilemoney/_control/lose-results').send({ count: 1 }).expect(200);
    const refundId = (await t.http.post('/v1/refunds').set('X-API-Key', key).send({ payment_id: paid.id }).expect(201)).body.data.id as string;
    await eventually(async () => ((await control()).lost_results === 0 ? true : null), 15_000, 'the result lost');

    // A status query whose result the simulator holds.
    await t.http.post('/sandbox/mobilemoney/_control/hold-results').send({ count: 1 }).expect(200);
    const ack = await t.http.post(`/v1/payments/mobilemoney/check-status/${paid.provider_ref}`).set('X-API-Key', key).expect(200);
    await eventually(async () => ((await control()).held_results === 0 ? true : null), 15_000, 'the result held');
    const [query] = await t.sql<{ id: string }>('SELECT id FROM provider_status_queries WHERE provider_query_ref = $1', [ack.body.data.OriginatorConversationID]);

    const lost = await simulatorLines('sandbox result lost on purpose (lose-results control)', refundId);
    const held = await simulatorLines('sandbox result held on purpose (hold-results control)', query!.id);
    expect(lost.map((l) => l.url)).toEqual([expect.stringMatching(new RegExp(`/v1/webhooks/mobilemoney/reversal/result\\?ref=${refundId}&token=\\[redacted\\]$`))]);
    expect(held.map((l) => l.url)).toEqual([expect.stringMatching(new RegExp(`/v1/webhooks/mobilemoney/transactionstatus/result\\?ref=${query!.id}&token=\\[redacted\\]$`))]);
    // No line of the service's log holds either token.
    for (const ref of [refundId, query!.id]) {
      const token = callbackToken(CREDS.passkey, ref);
      expect(logLines().filter((l) => l.includes(token))).toEqual([]);
    }
  });
});
