import { randomUUID } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import { ForwardingStub } from '../support/forwarding-stub.js';
import { startTestService, type TestService } from '../support/service.js';
import { WebhookReceiver, eventually } from '../support/webhook-receiver.js';

/**
 * WALLETPAY_BASE_URL reaching the simulator through a plain proxy (another address than the simulator's
 * public one, as behind a gateway): the simulator names its signing certificate under its own public
 * address, so the adapter cannot check it offline and the verify-webhook-signature postback decides.
 * Genuine events are applied as they are sent; forged ones are still refused.
 */
let t: TestService;
let proxy: ForwardingStub;
let receiver: WebhookReceiver;
let key: string;

beforeAll(async () => {
  proxy = new ForwardingStub();
  const proxyUrl = await proxy.start();
  // No status sync in the way: only the provider's event can complete a pending capture.
  t = await startTestService({ WALLETPAY_BASE_URL: `${proxyUrl}/sandbox/walletpay`, STATUS_SYNC_SCHEDULE: '1h' });
  proxy.target = t.baseUrl;
  receiver = await new WebhookReceiver().start();
  ({ apiKey: key } = await t.createMerchant('Proxied Wallet Shop'));
  await t.http.put('/v1/merchant/webhook').set('X-API-Key', key).send({ webhook_url: receiver.url }).expect(200);
  // Stored without webhook_id: the service registers its callback URL at the simulator (through the proxy).
  await t.http.put('/v1/merchant/credentials').set('X-API-Key', key)
    .send({ provider: 'walletpay', walletpay: { env: 'sandbox', client_id: `proxied-${randomUUID()}`, client_secret: 'proxied-secret' } }).expect(200);
});
afterAll(async () => {
  await proxy.stop();
  await t.stop();
  await receiver.stop();
});

const getPayment = async (id: string) => (await t.http.get(`/v1/payments/${id}`).set('X-API-Key', key).expect(200)).body.data;

type SentTransmission = { id: string; raw_body: string; transmission_time: string; signature: string; webhook_id: string; last_response_status: number | null; status: string };

/** The transmissions of `eventType` the simulator sent for order `orderId`. */
const transmissionsOf = (orderId: string, eventType: string) =>
  t.sql<SentTransmission>(
    `SELECT tr.* FROM sandbox_walletpay_transmissions tr JOIN sandbox_walletpay_events ev ON ev.id = tr.event_id
     WHERE ev.event_type = $1 AND tr.raw_body LIKE $2`, [eventType, `%${orderId}%`]);

describe('walletpay events with WALLETPAY_BASE_URL on another address than the simulator', () => {
  it("a genuine event, its certificate URL unchanged, is answered 200 and applied; a forged copy is refused 401", async () => {
    const created = await t.http.post('/v1/payments').set('X-API-Key', key).set('Idempotency-Key', randomUUID())
      .send({ provider: 'walletpay', amount: '23.00', currency: 'USD', return_url: 'https://shop.example.com/return', cancel_url: 'https://shop.example.com/cancel' })
      .expect(201);
    const p = created.body.data;
    // Held for review: the capture answers PENDING, and only PAYMENT.CAPTURE.COMPLETED completes the payment.
    await fetch(`${p.next_action.url}&auto=approve-pending`, { redirect: 'manual' });
    const captured = await t.http.post(`/v1/payments/${p.id}/capture`).set('X-API-Key', key).send({}).expect(200);
    expect(captured.body.data.status).toBe('pending');

    const [sent] = await eventually(async () => {
      const rows = await transmissionsOf(p.provider_ref, 'PAYMENT.CAPTURE.COMPLETED');
      return rows.length > 0 && rows[0]!.last_response_status !== null ? rows : null;
    }, 20_000, 'the completed event answered');
    expect(sent!).toMatchObject({ status: 'delivered', last_response_status: 200 });
    await eventually(async () => (await getPayment(p.id)).status === 'completed', 10_000, 'the payment completed by the event');
    await eventually(() => receiver.events('payment.completed').find((e) => e.json.data.payment_id === p.id), 10_000, 'payment.completed');

    // The same headers (the simulator's certificate URL, at its public address) with a body that was not signed.
    const [keys] = await t.sql<{ cert_id: string }>('SELECT cert_id FROM sandbox_walletpay_keys');
    const forged = sent!.raw_body.replace('"23.00"', '"0.01"');
    expect(forged).not.toBe(sent!.raw_body);
    const res = await t.http.post('/v1/webhooks/walletpay').set('Content-Type', 'application/json')
      .set('Walletpay-Transmission-Id', randomUUID()).set('Walletpay-Transmission-Time', sent!.transmission_time)
      .set('Walletpay-Transmission-Sig', sent!.signature).set('Walletpay-Webhook-Id', sent!.webhook_id).set('Walletpay-Auth-Algo', 'SHA256withRSA')
      .set('Walletpay-Cert-Url', `${t.baseUrl}/sandbox/walletpay/v1/notifications/certs/${keys!.cert_id}`)
      .send(forged);
    expect(res.status).toBe(401);
    expect(await t.sql('SELECT type FROM events WHERE payment_id = $1', [p.id])).toEqual([{ type: 'payment.completed' }]);
  });
});
