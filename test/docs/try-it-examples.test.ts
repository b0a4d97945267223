import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import { readFileSync } from 'node:fs';
import { startTestService, type TestService } from '../support/service.js';

/**
 * What a developer does first in /docs ("Try it"): store the credentials example of a provider, then
 * send that provider's payment example. Each pair must take a payment in the sandbox, not store
 * credentials the simulator then refuses (a payment failed with 502) — the examples are copied as
 * they are, straight from the committed openapi.json.
 */

interface MediaExample {
  summary?: string;
  value: Record<string, unknown>;
}
interface OpenApi {
  paths: Record<string, Record<string, { requestBody?: { content: Record<string, { examples?: Record<string, MediaExample> }> } }>>;
}

const doc = JSON.parse(readFileSync(new URL('../../openapi.json', import.meta.url), 'utf8')) as OpenApi;
const requestExamples = (path: string, method: string): MediaExample[] =>
  Object.values(doc.paths[path]?.[method]?.requestBody?.content['application/json']?.examples ?? {});

const credentialExamples = requestExamples('/v1/merchant/credentials', 'put');
// A saved card's example names a card this merchant does not have (its id is a placeholder): left out.
const paymentExamples = requestExamples('/v1/payments', 'post').filter((e) => e.value.saved_card_id === undefined);

let t: TestService;
let key: string;

beforeAll(async () => {
  t = await startTestService();
  ({ apiKey: key } = await t.createMerchant('Try It Shop'));
}, 60_000);
afterAll(async () => {
  await t.stop();
});

describe('the /docs request examples, as a developer tries them', () => {
  it('has a credentials example for every provider a payment example uses', () => {
    const stored = new Set(credentialExamples.map((e) => e.value.provider));
    expect(paymentExamples.length).toBeGreaterThanOrEqual(3);
    expect(paymentExamples.map((e) => e.value.provider).filter((p) => !stored.has(p))).toEqual([]);
  });

  it("takes a payment with each provider's credentials example and each payment example", async () => {
    for (const credentials of credentialExamples) {
      await t.http.put('/v1/merchant/credentials').set('X-API-Key', key).send(credentials.value).expect(200);
    }
    const outcomes = [];
    for (const [i, example] of paymentExamples.entries()) {
      const res = await t.http.post('/v1/payments').set('X-API-Key', key).set('Idempotency-Key', `try-it-${i}`).send(example.value);
      outcomes.push({ example: example.summary, status: res.status, payment: res.body.data?.status ?? res.body.error?.code });
    }
    // 201 and not failed: completed (a card token), pending (3-D Secure, a push prompt, a wallet order to approve).
    expect(outcomes.filter((o) => o.status !== 201 || o.payment === 'failed')).toEqual([]);
  });
});
