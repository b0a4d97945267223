import { X509Certificate, generateKeyPairSync, randomUUID, verify } from 'node:crypto';
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { crc32 } from 'node:zlib';
import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import type { WalletpayCredentials } from '../../contract/index.js';
import { WalletpayAdapter } from '../../server/providers/walletpay/adapter.js';
import { prepareWalletpayCredentials } from '../../server/providers/walletpay/credentials.js';
import { parseWalletpayEvent, verifyWalletpayEvent, walletpayTransmissionId } from '../../server/providers/walletpay/webhook.js';
import type { CreatePaymentInput, InboundRequest } from '../../server/domain/ports.js';
import { crc32 as adapterCrc32, walletpaySignedMessage } from '../../server/providers/walletpay/signed-message.js';
import { WalletpaySigningCertificates, isProviderCertUrl, isSigningCertificate, verifyOffline } from '../../server/providers/walletpay/signing-certificates.js';
import { selfSignedCertificate } from '../../server/sandbox/certificates.js';
import { MAX_ATTEMPTS, retryDelayMs } from '../../server/sandbox/walletpay/events.js';
import { startTestService, type TestService } from '../support/service.js';

interface Received {
  path: string;
  headers: Record<string, string | undefined>;
  rawBody: Buffer;
}

/** A merchant-side receiver on loopback: records every delivery; `status(path, n)` decides the answer. */
async function startReceiver(status: (path: string, nth: number) => number = () => 200) {
  const received: Received[] = [];
  const server = http.createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on('data', (c: Buffer) => chunks.push(c));
    req.on('end', () => {
      const headers: Record<string, string | undefined> = {};
      for (const [k, v] of Object.entries(req.headers)) headers[k] = Array.isArray(v) ? v.join(',') : v;
      const path = req.url ?? '/';
      received.push({ path, headers, rawBody: Buffer.concat(chunks) });
      res.statusCode = status(path, received.filter((r) => r.path === path).length);
      res.end();
    });
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const url = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  return {
    url,
    received,
    close: () => new Promise<void>((resolve) => server.close(() => resolve())),
  };
}

/**
 * How long a /down receiver refuses: longer than the simulator's whole delivery schedule used to last
 * (6 attempts, waits doubling from 100 ms at this suite's SANDBOX_CALLBACK_DELAY_MS: 3.1 s).
 */
const DOWN_MS = 4_500;

let t: TestService;
let adapter: WalletpayAdapter;
let receiver: Awaited<ReturnType<typeof startReceiver>>;
beforeAll(async () => {
  t = await startTestService();
  adapter = new WalletpayAdapter(t.service.container.config);
  // Paths under /flaky answer 500 to their first delivery; under /down, 503 for DOWN_MS after their first.
  const firstSeen = new Map<string, number>();
  receiver = await startReceiver((path, nth) => {
    if (path.startsWith('/flaky') && nth === 1) return 500;
    if (!path.startsWith('/down')) return 200;
    if (!firstSeen.has(path)) firstSeen.set(path, Date.now());
    return Date.now() - firstSeen.get(path)! < DOWN_MS ? 503 : 200;
  });
});
afterAll(async () => {
  await receiver.close();
  await t.stop();
});

const newCreds = (): WalletpayCredentials => ({ env: 'sandbox', client_id: `client-${randomUUID()}`, client_secret: `secret-${randomUUID()}` });

async function eventually<T>(probe: () => T | undefined | Promise<T | undefined>, what: string, timeoutMs = 15_000): Promise<T> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const value = await probe();
    if (value !== undefined) return value;
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 50));
  }
}

/** A subscribed merchant: its credentials carry the webhook id, deliveries go to a path of its own. */
async function subscribed(prefix = '/hooks') {
  const creds = newCreds();
  const path = `${prefix}/${randomUUID()}`;
  const { webhookId } = await adapter.registerWebhook(creds, `${receiver.url}${path}`);
  return { creds: { ...creds, webhook_id: webhookId }, path };
}

const deliveriesTo = (path: string) => receiver.received.filter((r) => r.path === path);

function eventType(r: Received): string {
  return (JSON.parse(r.rawBody.toString('utf8')) as { event_type: string }).event_type;
}

function asCallback(r: Received, overrides: Partial<InboundRequest> = {}): InboundRequest {
  return { subpath: '', headers: r.headers, rawBody: r.rawBody, body: JSON.parse(r.rawBody.toString('utf8')), query: {}, sourceIp: '127.0.0.1', ...overrides };
}

function paymentInput(): CreatePaymentInput {
  const paymentId = randomUUID();
  return {
    paymentId,
    reference: paymentId.replace(/-/g, '').slice(0, 12).toUpperCase(),
    amount: { minor: 1050n, currency: 'USD' },
    idempotencyKey: `payment-${paymentId}`,
    fields: { return_url: 'https://shop.example.com/return', cancel_url: 'https://shop.example.com/cancel' },
  };
}

async function capture(creds: WalletpayCredentials, outcome: 'approve' | 'approve-decline' = 'approve') {
  const input = paymentInput();
  const created = await adapter.createPayment(creds, input);
  await fetch(`${created.nextAction!.url}&auto=${outcome}`, { redirect: 'manual' });
  const captured = await adapter.capturePayment(creds, { orderId: created.providerRef, idempotencyKey: randomUUID() });
  return { input, created, captured };
}

/** The events the service subscribes to: the capture's outcome, refunds (ours or made at PayPal), reversals, a refund's later failure. */
const SERVICE_EVENTS = [
  'PAYMENT.CAPTURE.COMPLETED', 'PAYMENT.CAPTURE.DECLINED', 'PAYMENT.CAPTURE.DENIED', 'PAYMENT.CAPTURE.REFUNDED', 'PAYMENT.CAPTURE.REVERSED',
  'PAYMENT.REFUND.PENDING', 'PAYMENT.REFUND.FAILED',
];

describe('webhook registration', () => {
  it('registers a URL for the events the service acts on, and finds it again when it already exists', async () => {
    const creds = newCreds();
    const url = `${receiver.url}/hooks/${randomUUID()}`;
    const first = await adapter.registerWebhook(creds, url);
    expect(first.webhookId).toMatch(/^[A-Z0-9]{17}$/);
    const rows = await t.sql<{ url: string; event_types: { name: string }[] }>('SELECT url, event_types FROM sandbox_walletpay_webhooks WHERE client_id = $1', [creds.client_id]);
    expect(rows).toEqual([{ url, event_types: SERVICE_EVENTS.map((name) => ({ name })) }]);
    expect(await adapter.registerWebhook(creds, url)).toEqual(first);
  });

  it('a webhook already registered for the URL without every event the service needs gets them added (PATCH, replace /event_types), keeping its own', async () => {
    const creds = newCreds();
    const url = `${receiver.url}/hooks/${randomUUID()}`;
    const token = (await t.http.post('/sandbox/walletpay/v1/oauth2/token').auth(creds.client_id, creds.client_secret).type('form').send({ grant_type: 'client_credentials' }).expect(200)).body.access_token;
    // Made by hand in the dashboard, for captures only (and an event the service does not use).
    const made = await t.http.post('/sandbox/walletpay/v1/notifications/webhooks').set('Authorization', `Bearer ${token}`)
      .send({ url, event_types: [{ name: 'PAYMENT.CAPTURE.COMPLETED' }, { name: 'CHECKOUT.ORDER.APPROVED' }] }).expect(201);

    expect(await adapter.registerWebhook(creds, url)).toEqual({ webhookId: made.body.id });
    const [row] = await t.sql<{ event_types: { name: string }[] }>('SELECT event_types FROM sandbox_walletpay_webhooks WHERE id = $1', [made.body.id]);
    expect(row!.event_types.map((e) => e.name).sort()).toEqual([...SERVICE_EVENTS, 'CHECKOUT.ORDER.APPROVED'].sort());
    // Registered again: nothing is missing, nothing is sent (a patch that changes nothing is refused by PayPal).
    expect(await adapter.registerWebhook(creds, url)).toEqual({ webhookId: made.body.id });
    const noChange = await t.http.patch(`/sandbox/walletpay/v1/notifications/webhooks/${made.body.id}`).set('Authorization', `Bearer ${token}`)
      .send([{ op: 'replace', path: '/event_types', value: row!.event_types }]);
    expect(noChange.status).toBe(400);
    expect(noChange.body.name).toBe('WEBHOOK_PATCH_REQUEST_NO_CHANGE');
    const wrongOp = await t.http.patch(`/sandbox/walletpay/v1/notifications/webhooks/${made.body.id}`).set('Authorization', `Bearer ${token}`)
      .send([{ op: 'add', path: '/event_types', value: [{ name: 'PAYMENT.CAPTURE.DENIED' }] }]);
    expect(wrongOp.status).toBe(400);
  });

  it('prepares credentials: registers the service callback URL when webhook_id is absent, keeps a given one', async () => {
    const config = t.service.container.config;
    const prepare = prepareWalletpayCredentials(adapter, config);
    const creds = newCreds();
    const prepared = await prepare('merchant-1', creds);
    expect(prepared).toEqual({ ...creds, webhook_id: expect.stringMatching(/^[A-Z0-9]{17}$/) });
    const rows = await t.sql<{ id: string; url: string }>('SELECT id, url FROM sandbox_walletpay_webhooks WHERE client_id = $1', [creds.client_id]);
    expect(rows).toEqual([{ id: prepared.webhook_id, url: `${config.publicBaseUrl}/v1/webhooks/walletpay` }]);

    const given = { ...newCreds(), webhook_id: 'WH-GIVEN' };
    expect(await prepare('merchant-2', given)).toBe(given);
    expect(await t.sql('SELECT id FROM sandbox_walletpay_webhooks WHERE client_id = $1', [given.client_id])).toEqual([]);
  });
});

describe('signed events', () => {
  it('delivers PAYMENT.CAPTURE.COMPLETED signed, verified by the postback and parsed to the payment', async () => {
    const { creds, path } = await subscribed();
    const { input, created, captured } = await capture(creds);
    const delivery = await eventually(() => deliveriesTo(path)[0], 'the capture event');
    expect(delivery.headers).toMatchObject({
      'content-type': 'application/json',
      'walletpay-transmission-id': expect.stringMatching(/^[0-9a-f-]{36}$/),
      'walletpay-transmission-time': expect.stringMatching(/^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ$/),
      'walletpay-transmission-sig': expect.any(String),
      'walletpay-cert-url': expect.stringContaining('/sandbox/walletpay/v1/notifications/certs/CERT-'),
      'walletpay-auth-algo': 'SHA256withRSA',
      'walletpay-webhook-id': creds.webhook_id,
    });
    const callback = asCallback(delivery);
    expect(await verifyWalletpayEvent(adapter, creds, callback)).toBe('verified');
    expect(walletpayTransmissionId(callback)).toBe(delivery.headers['walletpay-transmission-id']);

    const event = parseWalletpayEvent(callback.body);
    expect(event).toEqual({
      kind: 'payment',
      eventId: expect.stringMatching(/^WH-[A-Z0-9]{17}-[A-Z0-9]{17}$/),
      eventType: 'PAYMENT.CAPTURE.COMPLETED',
      orderId: created.providerRef,
      captureId: captured.data!.captureId,
      customId: input.paymentId,
      status: 'completed',
      amount: { minor: 1050n, currency: 'USD' },
      failureReason: null,
    });
  });

  it('signs as PayPal does: RSA-SHA256 over id|time|webhookId|crc32(body), checkable offline with the certificate URL', async () => {
    const { creds, path } = await subscribed();
    await capture(creds);
    const delivery = await eventually(() => deliveriesTo(path)[0], 'the capture event');
    const h = delivery.headers;
    const pem = await (await fetch(h['walletpay-cert-url']!)).text();
    // An X.509 certificate, as PayPal serves: node:crypto reads it and its key checks the signature.
    expect(pem).toContain('BEGIN CERTIFICATE');
    const cert = new X509Certificate(pem);
    expect(cert.verify(cert.publicKey)).toBe(true); // self-signed
    expect(cert.subject).toContain('CN=messageverificationcerts.sandbox.paypal.com'); // PayPal's sandbox signing name
    expect(Date.parse(cert.validTo)).toBeGreaterThan(Date.now());
    const message = `${h['walletpay-transmission-id']}|${h['walletpay-transmission-time']}|${creds.webhook_id}|${crc32(delivery.rawBody)}`;
    expect(verify('sha256', Buffer.from(message), cert.publicKey, Buffer.from(h['walletpay-transmission-sig']!, 'base64'))).toBe(true);
    // The real provider's header names come too.
    expect(h['paypal-transmission-sig']).toBe(h['walletpay-transmission-sig']);
  });

  it('rejects a forged body, a disagreeing webhook id header, missing headers and another merchant', async () => {
    const { creds, path } = await subscribed();
    await capture(creds);
    const delivery = await eventually(() => deliveriesTo(path)[0], 'the capture event');

    const forgedBody = JSON.parse(delivery.rawBody.toString('utf8')) as { resource: { amount: { value: string } } };
    forgedBody.resource.amount.value = '0.01';
    const forgedRaw = Buffer.from(JSON.stringify(forgedBody));
    expect(await verifyWalletpayEvent(adapter, creds, asCallback(delivery, { body: forgedBody, rawBody: forgedRaw }))).toBe('invalid');

    const wrongId = asCallback(delivery, { headers: { ...delivery.headers, 'walletpay-webhook-id': 'SOMEONEELSE12345' } });
    expect(await verifyWalletpayEvent(adapter, creds, wrongId)).toBe('invalid');

    const noSig = { ...delivery.headers };
    delete noSig['walletpay-transmission-sig'];
    delete noSig['paypal-transmission-sig'];
    expect(await verifyWalletpayEvent(adapter, creds, asCallback(delivery, { headers: noSig }))).toBe('invalid');

    const { webhook_id: _dropped, ...withoutWebhookId } = creds;
    expect(await verifyWalletpayEvent(adapter, withoutWebhookId, asCallback(delivery))).toBe('invalid');

    // Another merchant (another app) cannot have this event verified against its own webhook.
    const other = await subscribed();
    const replayed = asCallback(delivery, { headers: { ...delivery.headers, 'walletpay-webhook-id': other.creds.webhook_id } });
    expect(await verifyWalletpayEvent(adapter, other.creds, replayed)).toBe('invalid');
  });

  it('delivers PAYMENT.CAPTURE.DECLINED for a declined capture (as PayPal names it), parsed as failed', async () => {
    const { creds, path } = await subscribed();
    const { created } = await capture(creds, 'approve-decline');
    const delivery = await eventually(() => deliveriesTo(path)[0], 'the declined event');
    expect(await verifyWalletpayEvent(adapter, creds, asCallback(delivery))).toBe('verified');
    expect(parseWalletpayEvent(asCallback(delivery).body)).toMatchObject({ kind: 'payment', eventType: 'PAYMENT.CAPTURE.DECLINED', orderId: created.providerRef, status: 'failed', failureReason: expect.stringMatching(/^capture DECLINED/) });
  });

  it('delivers PAYMENT.CAPTURE.REFUNDED, parsed to the refund and its capture', async () => {
    const { creds, path } = await subscribed();
    const { input, captured } = await capture(creds);
    const refundId = randomUUID();
    const refund = await adapter.refundPayment(creds, {
      refundId,
      payment: { paymentId: input.paymentId, providerRef: captured.providerRef, reference: input.reference, providerData: captured.data ?? {}, amount: input.amount, receiptNumber: null },
      amount: { minor: 300n, currency: 'USD' },
      idempotencyKey: `refund-${refundId}`,
    });
    const delivery = await eventually(() => deliveriesTo(path).find((r) => eventType(r) === 'PAYMENT.CAPTURE.REFUNDED'), 'the refund event');
    expect(await verifyWalletpayEvent(adapter, creds, asCallback(delivery))).toBe('verified');
    expect(parseWalletpayEvent(asCallback(delivery).body)).toEqual({
      kind: 'refund',
      eventId: expect.stringMatching(/^WH-/),
      eventType: 'PAYMENT.CAPTURE.REFUNDED',
      captureId: captured.data!.captureId,
      refundId: refund.providerRef,
      customId: refundId,
      status: 'completed',
      amount: { minor: 300n, currency: 'USD' },
      failureReason: null,
    });
  });

  it('retries a failed delivery with the same transmission id and bytes', async () => {
    const { creds, path } = await subscribed('/flaky');
    await capture(creds);
    const [first, second] = await eventually(() => (deliveriesTo(path).length >= 2 ? deliveriesTo(path) : undefined), 'the retried delivery');
    expect(second!.headers['walletpay-transmission-id']).toBe(first!.headers['walletpay-transmission-id']);
    expect(second!.rawBody.equals(first!.rawBody)).toBe(true);
    const row = await eventually(async () => {
      const [r] = await t.sql<{ status: string; attempts: number }>('SELECT status, attempts FROM sandbox_walletpay_transmissions WHERE id = $1', [first!.headers['walletpay-transmission-id']]);
      return r?.status === 'delivered' ? r : undefined;
    }, 'the transmission to be marked delivered');
    expect(row.attempts).toBe(2);
  });

  it('keeps retrying a receiver that is down longer than a few seconds, and delivers once it answers 200', async () => {
    const { creds, path } = await subscribed('/down');
    await capture(creds);
    const first = await eventually(() => deliveriesTo(path)[0], 'the first delivery');
    const row = await eventually(async () => {
      const [r] = await t.sql<{ status: string; attempts: number }>('SELECT status, attempts FROM sandbox_walletpay_transmissions WHERE id = $1', [first.headers['walletpay-transmission-id']]);
      return r?.status !== 'pending' ? r : undefined;
    }, 'the transmission settled', 30_000);
    expect(row.status).toBe('delivered');
    expect(row.attempts).toBeGreaterThan(6);
    const deliveries = deliveriesTo(path);
    expect(deliveries.at(-1)!.rawBody.equals(first.rawBody)).toBe(true);
    expect(new Set(deliveries.map((d) => d.headers['walletpay-transmission-id']))).toEqual(new Set([first.headers['walletpay-transmission-id']]));
  }, 45_000);

  it("retries as PayPal does: 25 attempts over about 3 days (at the default 1 s callback delay), waits doubling from it", () => {
    expect(MAX_ATTEMPTS).toBe(25);
    const waits = Array.from({ length: MAX_ATTEMPTS - 1 }, (_, i) => retryDelayMs(i + 1, 1000));
    expect(waits.slice(0, 4)).toEqual([1000, 2000, 4000, 8000]);
    const hours = waits.reduce((a, b) => a + b, 0) / 3_600_000;
    // About 3 days, the last attempt still inside the 72 h a receiver accepts the transmission time for.
    expect(hours).toBeGreaterThan(60);
    expect(hours).toBeLessThan(72);
    // Scaled by the callback delay (at least 100 ms), as the first attempt's wait.
    expect(retryDelayMs(3, 50)).toBe(400);
  });

  it('ignores event types the service does not act on', () => {
    expect(parseWalletpayEvent({ id: 'WH-1', event_type: 'CHECKOUT.ORDER.APPROVED', resource: { id: 'X' } })).toEqual({ kind: 'ignored', eventId: 'WH-1', eventType: 'CHECKOUT.ORDER.APPROVED' });
    expect(parseWalletpayEvent('nonsense')).toEqual({ kind: 'ignored', eventId: null, eventType: null });
  });
});

describe('offline verification (CRC-32 + SHA256withRSA with the certificate from the provider host)', () => {
  const outage = (mode: 'ok' | 'error') => t.http.post('/sandbox/walletpay/_control/outage').send({ mode }).expect(200);

  it('a genuine event verifies and a forged one is refused without any call to the provider once the certificate is cached', async () => {
    const { creds, path } = await subscribed();
    await capture(creds);
    const delivery = await eventually(() => deliveriesTo(path)[0], 'the capture event');
    const offlineAdapter = new WalletpayAdapter(t.service.container.config);
    expect(await verifyWalletpayEvent(offlineAdapter, creds, asCallback(delivery))).toBe('verified'); // downloads and caches the certificate
    await outage('error');
    try {
      // The provider is down: neither answer can have come from a postback.
      expect(await verifyWalletpayEvent(offlineAdapter, creds, asCallback(delivery))).toBe('verified');
      const forged = Buffer.from(delivery.rawBody.toString('utf8').replace('"10.50"', '"0.01"'));
      expect(forged.equals(delivery.rawBody)).toBe(false);
      expect(await verifyWalletpayEvent(offlineAdapter, creds, asCallback(delivery, { rawBody: forged, body: JSON.parse(forged.toString('utf8')) }))).toBe('invalid');
      const badSig = { ...delivery.headers, 'walletpay-transmission-sig': Buffer.from('x'.repeat(256)).toString('base64') };
      expect(await verifyWalletpayEvent(offlineAdapter, creds, asCallback(delivery, { headers: badSig }))).toBe('invalid');
    } finally {
      await outage('ok');
    }
  });

  it("a certificate URL on another host than the simulator's base URL is never downloaded: the postback decides", async () => {
    const { creds, path } = await subscribed();
    await capture(creds);
    const delivery = await eventually(() => deliveriesTo(path)[0], 'the capture event');
    const before = receiver.received.length;
    const foreign = { ...delivery.headers, 'walletpay-cert-url': `${receiver.url}/v1/notifications/certs/CERT-FORGER`, 'paypal-cert-url': undefined };
    const fresh = new WalletpayAdapter(t.service.container.config);
    await outage('error');
    try {
      // Not judged offline: with the provider down the postback's failure is an error, not a verdict.
      await expect(verifyWalletpayEvent(fresh, creds, asCallback(delivery, { headers: foreign }))).rejects.toMatchObject({ name: 'ProviderError' });
    } finally {
      await outage('ok');
    }
    // The provider refuses a certificate URL that is not its own.
    expect(await verifyWalletpayEvent(fresh, creds, asCallback(delivery, { headers: foreign }))).toBe('invalid');
    expect(receiver.received.length).toBe(before); // the forger's host was never asked
  });

  it('falls back to the verify-webhook-signature postback only when the offline check cannot be done', async () => {
    const { creds, path } = await subscribed();
    await capture(creds);
    const delivery = await eventually(() => deliveriesTo(path)[0], 'the capture event');
    const fresh = new WalletpayAdapter(t.service.container.config);
    await outage('error');
    try {
      // Certificate not cached and unobtainable: the postback is tried, and the provider being down is an error, not a verdict.
      await expect(verifyWalletpayEvent(fresh, creds, asCallback(delivery))).rejects.toMatchObject({ name: 'ProviderError' });
    } finally {
      await outage('ok');
    }
    // Once the provider answers again the same adapter verifies it (offline, the certificate now downloaded).
    expect(await verifyWalletpayEvent(fresh, creds, asCallback(delivery))).toBe('verified');
  });

  it("the adapter's CRC-32 and signed string are PayPal's: known answers, not the simulator's code", () => {
    // CRC-32/IEEE's published check value; a wrong polynomial, seed or sign fails every real delivery.
    expect(adapterCrc32('123456789')).toBe(3421780262);
    expect(adapterCrc32(Buffer.from('123456789'))).toBe(3421780262);
    const body = '{"id":"WH-58D329510W468432D-8HN650336L201105X","event_type":"PAYMENT.CAPTURE.COMPLETED"}';
    expect(walletpaySignedMessage('69cd13f0-d67a-11e5-baa3-778b53f4ae55', '2016-02-18T20:01:35Z', '1JE4291016473214C', body))
      .toBe('69cd13f0-d67a-11e5-baa3-778b53f4ae55|2016-02-18T20:01:35Z|1JE4291016473214C|1663949484');
  });

  it("the provider's own host: https on PayPal's API hosts under its certificates path for the real provider; the same origin and certificates path for the simulator", () => {
    const live = 'https://api-m.sandbox.paypal.com';
    expect(isProviderCertUrl('https://api.sandbox.paypal.com/v1/notifications/certs/CERT-360caa42-fca2a594-d2a9e8b5', live)).toBe(true);
    expect(isProviderCertUrl('https://api.paypal.com/v1/notifications/certs/CERT-1', 'https://api-m.paypal.com')).toBe(true);
    for (const bad of ['http://api.paypal.com/v1/notifications/certs/C', 'https://api.paypal.com.evil.example/c', 'https://evilpaypal.com/c', 'https://api.paypal.com:8443/c', 'https://user@api.paypal.com/c', 'not a url']) {
      expect(isProviderCertUrl(bad, live)).toBe(false);
    }
    // Only PayPal's API hosts, under the certificates path: not any page of paypal.com.
    expect(isProviderCertUrl('https://api-m.paypal.com/v1/notifications/certs/CERT-1', live)).toBe(true);
    expect(isProviderCertUrl('https://api-m.sandbox.paypal.com/v1/notifications/certs/CERT-1', live)).toBe(true);
    for (const page of [
      'https://www.paypal.com/search?q=x', 'https://www.paypal.com/v1/notifications/certs/CERT-1', 'https://paypal.com/v1/notifications/certs/CERT-1',
      'https://api.paypal.com/v1/oauth2/token', 'https://api.paypal.com/v1/notifications/certs/CERT-1?q=x', 'https://api.paypal.com/v1/notifications/certs/',
      'https://api.paypal.com/v1/notifications/certs/CERT-1/../../../search',
    ]) {
      expect({ page, accepted: isProviderCertUrl(page, live) }).toEqual({ page, accepted: false });
      expect({ page, accepted: isProviderCertUrl(page, 'https://egress.internal/paypal') }).toEqual({ page, accepted: false });
    }
    const sim = 'http://127.0.0.1:3000/sandbox/walletpay';
    expect(isProviderCertUrl('http://127.0.0.1:3000/sandbox/walletpay/v1/notifications/certs/CERT-1', sim)).toBe(true);
    expect(isProviderCertUrl('http://127.0.0.1:3001/sandbox/walletpay/v1/notifications/certs/CERT-1', sim)).toBe(false);
    expect(isProviderCertUrl('http://127.0.0.1:3000/sandbox/cardpay/v1/notifications/certs/CERT-1', sim)).toBe(false);
  });

  it('behind an egress proxy: PayPal-hosted certificates are checked offline; another host is refused for live credentials, left to the postback for sandbox ones', async () => {
    const egress = 'https://egress.internal/paypal';
    expect(isProviderCertUrl('https://api.paypal.com/v1/notifications/certs/CERT-1', egress)).toBe(true);
    expect(isProviderCertUrl('https://evil.example/v1/notifications/certs/CERT-1', egress)).toBe(false);
    const transmission = {
      transmissionId: randomUUID(), transmissionTime: new Date().toISOString(), transmissionSig: 'c2ln', certUrl: 'https://evil.example/v1/notifications/certs/CERT-1',
      authAlgo: 'SHA256withRSA', webhookId: 'WH-1', rawBody: Buffer.from('{}'),
    };
    const certificates = new WalletpaySigningCertificates(1000);
    // Live: a forged event naming the forger's certificate costs no postback with the merchant's live credentials.
    expect(await verifyOffline(transmission, egress, certificates, 'live')).toBe('invalid');
    expect(await verifyOffline(transmission, egress, certificates, 'sandbox')).toBe('unverifiable');
    expect(await verifyOffline(transmission, 'https://api-m.paypal.com', certificates, 'sandbox')).toBe('invalid');
  });

  it('reads a certificate only from a body of PEM certificates (the signing one first, then its issuers, as PayPal serves it): a PEM inside an HTML page is refused', async () => {
    const { privateKey } = generateKeyPairSync('rsa', { modulusLength: 2048, privateKeyEncoding: { type: 'pkcs8', format: 'pem' }, publicKeyEncoding: { type: 'spki', format: 'pem' } });
    const pem = selfSignedCertificate(privateKey, 'messageverificationcerts.sandbox.paypal.com', 'PayPal, Inc.');
    const issuer = selfSignedCertificate(privateKey, 'DigiCert SHA2 High Assurance Server CA', 'DigiCert Inc');
    const bodies: Record<string, string> = {
      '/plain': pem,
      '/spaced': `\n\n${pem.trim()}\r\n\n`,
      '/chain': `${pem}${issuer}`,
      '/html': `<html><body><p>Results for</p><pre>${pem}</pre></body></html>`,
      '/text-before': `note: ${pem}`,
      '/chain-then-text': `${pem}${issuer}<p>more</p>`,
    };
    const server = http.createServer((req, res) => res.writeHead(200, { 'Content-Type': 'text/html' }).end(bodies[req.url ?? ''] ?? ''));
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
    try {
      const base = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
      const certificates = new WalletpaySigningCertificates(2000);
      const read = async (path: string) => {
        const got = await certificates.get(`${base}${path}`);
        return typeof got === 'string' ? got : 'certificate';
      };
      expect(await read('/plain')).toBe('certificate');
      expect(await read('/spaced')).toBe('certificate');
      const chain = await certificates.get(`${base}/chain`);
      expect(typeof chain === 'string' ? chain : chain.subject).toContain('CN=messageverificationcerts.sandbox.paypal.com');
      expect(await read('/html')).toBe('refused');
      expect(await read('/text-before')).toBe('refused');
      expect(await read('/chain-then-text')).toBe('refused');
    } finally {
      await new Promise((resolve) => server.close(resolve));
    }
  });

  it("trusts offline only PayPal's message-signing certificates (its SDK's name rule), live or sandbox", () => {
    const { privateKey } = generateKeyPairSync('rsa', { modulusLength: 2048, privateKeyEncoding: { type: 'pkcs8', format: 'pem' }, publicKeyEncoding: { type: 'spki', format: 'pem' } });
    const named = (cn: string) => isSigningCertificate(new X509Certificate(selfSignedCertificate(privateKey, cn, 'PayPal, Inc.')));
    expect([named('messageverificationcerts.paypal.com'), named('messageverificationcerts.sandbox.paypal.com')]).toEqual([true, true]);
    for (const other of ['api.paypal.com', 'www.paypal.com', 'messageverificationcerts.paypal.com.evil.example', 'messageverificationcerts.walletpay.sandbox', 'xmessageverificationcerts.paypal.com']) {
      expect({ other, trusted: named(other) }).toEqual({ other, trusted: false });
    }
  });
});
