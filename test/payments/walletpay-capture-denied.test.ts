import { randomUUID } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import { startTestService, type TestService } from '../support/service.js';
import { WebhookReceiver, eventually } from '../support/webhook-receiver.js';

/**
 * A walletpay capture held for review (PENDING) that PayPal later denies: the capture becomes DECLINED
 * and PayPal sends PAYMENT.CAPTURE.DENIED with the capture as its resource. The simulator's
 * `approve-pending-denied` outcome does that; the service fails the payment from the event.
 */
let t: TestService;
let receiver: WebhookReceiver;
let key: string;
const client = { id: `denied-${randomUUID()}`, secret: 'denied-secret' };

beforeAll(async () => {
  // No status sync in the way: only the provider's event can settle the pending capture.
  t = await startTestService({ STATUS_SYNC_SCHEDULE: '1h' });
  receiver = await new WebhookReceiver().start();
  ({ apiKey: key } = await t.createMerchant('Reviewed Wallet Shop'));
  await t.http.put('/v1/merchant/webhook').set('X-API-Key', key).send({ webhook_url: receiver.url }).expect(200);
  await t.http.put('/v1/merchant/credentials').set('X-API-Key', key)
    .send({ provider: 'walletpay', walletpay: { env: 'sandbox', client_id: client.id, client_secret: client.secret } }).expect(200);
});
afterAll(async () => {
  await t.stop();
  await receiver.stop();
});

const getPayment = async (id: string) => (await t.http.get(`/v1/payments/${id}`).set('X-API-Key', key).expect(200)).body.data;

describe('walletpay: a capture held for review, then denied', () => {
  it('is pending with its capture id, then failed by PAYMENT.CAPTURE.DENIED; the merchant gets one payment.failed', async () => {
    const p = (await t.http.post('/v1/payments').set('X-API-Key', key).set('Idempotency-Key', randomUUID())
      .send({ provider: 'walletpay', amount: '31.00', currency: 'USD', return_url: 'https://shop.example.com/return', cancel_url: 'https://shop.example.com/cancel' })
      .expect(201)).body.data;
    await fetch(`${p.next_action.url}&auto=approve-pending-denied`, { redirect: 'manual' });
    const captured = await t.http.post(`/v1/payments/${p.id}/capture`).set('X-API-Key', key).send({}).expect(200);
    expect(captured.body.data.status).toBe('pending');
    const [held] = await t.sql<{ status: string; capture_id: string }>(
      `SELECT status, provider_data->>'captureId' AS capture_id FROM payments WHERE id = $1`, [p.id]);
    const [capture] = await t.sql<{ id: string }>('SELECT id FROM sandbox_walletpay_captures WHERE order_id = $1', [p.provider_ref]);
    expect(held).toEqual({ status: 'pending', capture_id: capture!.id });

    const failed = await eventually(() => receiver.events('payment.failed').find((e) => e.json.data.payment_id === p.id), 20_000, 'payment.failed');
    expect(await getPayment(p.id)).toMatchObject({ status: 'failed' });
    // Why, as a capture answered DECLINED says it (was "declined by the provider": the event's reason dropped).
    expect(await t.sql('SELECT failure_reason, receipt_number FROM payments WHERE id = $1', [p.id])).toEqual([{ failure_reason: 'capture DECLINED', receipt_number: capture!.id }]);
    expect(failed.json.data).toMatchObject({ payment_id: p.id, status: 'failed' });
    // PayPal's event: the denied capture itself, DECLINED, naming its order.
    const [event] = await t.sql<{ body: { summary: string; resource_type: string; resource: Record<string, unknown> } }>(
      `SELECT body FROM sandbox_walletpay_events WHERE event_type = 'PAYMENT.CAPTURE.DENIED' AND body->'resource'->>'id' = $1`, [capture!.id]);
    expect(event!.body).toMatchObject({
      resource_type: 'capture',
      summary: 'Payment denied for USD 31.00',
      resource: { id: capture!.id, status: 'DECLINED', amount: { currency_code: 'USD', value: '31.00' }, custom_id: p.id, supplementary_data: { related_ids: { order_id: p.provider_ref } } },
    });
    const [sent] = await t.sql<{ last_response_status: number }>(
      `SELECT tr.last_response_status FROM sandbox_walletpay_transmissions tr JOIN sandbox_walletpay_events ev ON ev.id = tr.event_id
       WHERE ev.event_type = 'PAYMENT.CAPTURE.DENIED' AND ev.body->'resource'->>'id' = $1`, [capture!.id]);
    expect(sent!.last_response_status).toBe(200);
    // One payment.failed, nothing else, for the merchant.
    expect(await t.sql('SELECT type FROM events WHERE payment_id = $1', [p.id])).toEqual([{ type: 'payment.failed' }]);
  });
});

const createPayment = async (amount: string) =>
  (await t.http.post('/v1/payments').set('X-API-Key', key).set('Idempotency-Key', randomUUID())
    .send({ provider: 'walletpay', amount, currency: 'USD', return_url: 'https://shop.example.com/return', cancel_url: 'https://shop.example.com/cancel' })
    .expect(201)).body.data;

describe('walletpay: a payment settled by PAYMENT.CAPTURE.COMPLETED alone (its capture made at PayPal, or its answer lost)', () => {
  it('is completed with the capture id as its receipt number, as a capture answered COMPLETED records it', async () => {
    const p = await createPayment('12.00');
    await fetch(`${p.next_action.url}&auto=approve`, { redirect: 'manual' });
    // The merchant captures at PayPal with their own credentials: the service sees no capture answer.
    const token = (await t.http.post('/sandbox/walletpay/v1/oauth2/token').auth(client.id, client.secret).type('form').send({ grant_type: 'client_credentials' }).expect(200)).body.access_token as string;
    await t.http.post(`/sandbox/walletpay/v2/checkout/orders/${p.provider_ref}/capture`).set('Authorization', `Bearer ${token}`)
      .set('PayPal-Request-Id', randomUUID()).send({}).expect(201);
    const [capture] = await t.sql<{ id: string }>('SELECT id FROM sandbox_walletpay_captures WHERE order_id = $1', [p.provider_ref]);

    await eventually(() => receiver.events('payment.completed').find((e) => e.json.data.payment_id === p.id), 20_000, 'payment.completed');
    // Was null: the event's capture id was kept in provider_data only.
    expect(await t.sql(`SELECT status, receipt_number, provider_data->>'captureId' AS capture_id FROM payments WHERE id = $1`, [p.id]))
      .toEqual([{ status: 'completed', receipt_number: capture!.id, capture_id: capture!.id }]);
  });
});
