import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import { startTestService, type TestService } from '../support/service.js';
import { WebhookReceiver, eventually } from '../support/webhook-receiver.js';

// The creation answer is written in one statement when it can be (status-writer.ts, applyCreation):
// the payment's change, its audit row, the event, its delivery and the Idempotency-Key's answer commit
// together. These are the cases where that path must write exactly what the general writer writes, or
// step aside for it. In the first service the simulator answers creates 3 s late (1.5 s was overtaken on a loaded CI host), so its callback
// (sent 50 ms after the charge) reaches the service before the answer does; in the second it answers
// at once.

let slow: TestService;
let prompt: TestService;
let t: TestService;
let receiver: WebhookReceiver;
let counter = 0;

async function shop(name: string, webhookUrl: string | null) {
  const { apiKey, merchantId } = await t.createMerchant(name);
  if (webhookUrl) await t.http.put('/v1/merchant/webhook').set('X-API-Key', apiKey).send({ webhook_url: webhookUrl }).expect(200);
  await t.http.put('/v1/merchant/credentials').set('X-API-Key', apiKey).send({ provider: 'cardpay', cardpay: { secret_key: `sk_test_answer_${name.length}_0001` } }).expect(200);
  return { apiKey, merchantId };
}

const create = (apiKey: string, key: string, paymentMethod = 'pm_card_visa') =>
  t.http.post('/v1/payments').set('X-API-Key', apiKey).set('Idempotency-Key', key).send({ provider: 'cardpay', amount: '25.00', currency: 'USD', payment_method: paymentMethod });

const transitions = async (apiKey: string, id: string) =>
  ((await t.http.get(`/v1/payments/${id}/transitions`).set('X-API-Key', apiKey).expect(200)).body.data as { from_status: string | null; to_status: string; trigger: string; accepted: boolean }[])
    .map((r) => `${r.from_status ?? '∅'}→${r.to_status} ${r.trigger}${r.accepted ? '' : ' refused'}`);

const events = async (apiKey: string, id: string) =>
  ((await t.http.get(`/v1/events?payment_id=${id}`).set('X-API-Key', apiKey).expect(200)).body.data as { type: string }[]).map((e) => e.type);

beforeAll(async () => {
  [slow, prompt] = await Promise.all([startTestService({ SANDBOX_LATENCY_MS: '3000', SANDBOX_CALLBACK_DELAY_MS: '50' }), startTestService()]);
  receiver = await new WebhookReceiver().start();
}, 60_000);
afterAll(async () => {
  await Promise.all([slow?.stop(), prompt?.stop()]);
  await receiver.stop();
});

describe('the answer to a create', () => {
  it('a callback that settled the payment first wins: the late answer adds no second move, event or webhook', async () => {
    t = slow;
    const { apiKey } = await shop('Race Shop', receiver.url);
    const key = `race-${++counter}`;
    const answer = create(apiKey, key).then((res) => res);
    // While the answer is still on its way, the provider's callback completes the payment.
    const id = await eventually(async () => {
      const rows = await t.sql<{ id: string; status: string }>('SELECT id, status FROM payments WHERE idempotency_key = $1', [key]);
      return rows[0]?.status === 'completed' ? rows[0].id : null;
    }, 10_000, 'the callback completing the payment');
    const res = await answer;
    expect(res.status).toBe(201);
    expect(res.body.data).toMatchObject({ id, status: 'completed', provider_ref: expect.stringMatching(/^pi_/) });

    const moves = await transitions(apiKey, id);
    expect(moves[0]).toBe('∅→pending create');
    expect(moves.filter((m) => m.startsWith('pending→completed'))).toHaveLength(1);
    expect(moves.find((m) => m.startsWith('pending→completed'))).not.toContain(' create');
    expect(await events(apiKey, id)).toEqual(['payment.completed']);
    await eventually(() => receiver.events('payment.completed').find((e) => e.json.data.payment_id === id), 10_000, 'payment.completed');
    await new Promise((r) => setTimeout(r, 500));
    expect(receiver.events('payment.completed').filter((e) => e.json.data.payment_id === id)).toHaveLength(1);

    // The key holds that answer.
    const again = await create(apiKey, key);
    expect(again.status).toBe(200);
    expect(again.headers['idempotent-replayed']).toBe('true');
    expect(again.body.data).toMatchObject({ id, status: 'completed' });
  }, 90_000);

  it('the answer is the payment as stored: the 201 body is what GET /v1/payments/{id} shows', async () => {
    t = prompt;
    const { apiKey } = await shop('Mirror Shop', receiver.url);
    for (const method of ['pm_card_visa', 'pm_card_chargeDeclined', 'pm_card_threeDSecureRequired']) {
      const res = await create(apiKey, `mirror-${++counter}`, method);
      expect(res.status).toBe(201);
      const stored = await t.http.get(`/v1/payments/${res.body.data.id}`).set('X-API-Key', apiKey).expect(200);
      const { provider_response: _raw, ...shown } = stored.body.data;
      expect(res.body.data).toEqual(shown);
    }
  }, 30_000);

  it('a merchant with no webhook URL gets the event recorded and nothing sent', async () => {
    t = prompt;
    const { apiKey } = await shop('Quiet Shop', null);
    const res = await create(apiKey, `quiet-${++counter}`, 'pm_card_chargeDeclined');
    expect(res.status).toBe(201);
    expect(res.body.data).toMatchObject({ status: 'failed', failure_reason: 'Your card was declined.' });
    const id = res.body.data.id as string;
    expect(await transitions(apiKey, id)).toEqual(['∅→pending create', 'pending→failed create']);
    expect(await events(apiKey, id)).toEqual(['payment.failed']);
    expect(await t.sql('SELECT 1 FROM webhook_deliveries WHERE payment_id = $1', [id])).toEqual([]);
    expect(await t.sql('SELECT recovery_point, answer FROM idempotency_keys WHERE resource_id = $1', [id])).toEqual([{ recovery_point: 'finished', answer: { status: 201 } }]);
  }, 30_000);
});
