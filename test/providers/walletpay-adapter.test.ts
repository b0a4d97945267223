import { randomUUID } from 'node:crypto';
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import type { WalletpayCredentials } from '../../contract/index.js';
import { WalletpayAdapter } from '../../server/providers/walletpay/adapter.js';
import { walletpayProvider } from '../../server/providers/walletpay/provider.js';
import { ProviderError, type CreatePaymentInput, type ProviderPaymentResult, type RefundInput } from '../../server/domain/ports.js';
import { ForwardingStub, type Forward, type StubAnswer, type StubRequest } from '../support/forwarding-stub.js';
import { startTestService, type TestService } from '../support/service.js';

let t: TestService;
let adapter: WalletpayAdapter;
beforeAll(async () => {
  t = await startTestService();
  adapter = new WalletpayAdapter(t.service.container.config);
});
afterAll(async () => t.stop());

/** A fresh tenant per test: any client id / secret pair is an app at the simulator. */
const newCreds = (): WalletpayCredentials => ({ env: 'sandbox', client_id: `client-${randomUUID()}`, client_secret: `secret-${randomUUID()}` });

function paymentInput(overrides: Partial<CreatePaymentInput> = {}): CreatePaymentInput {
  const paymentId = randomUUID();
  return {
    paymentId,
    reference: paymentId.replace(/-/g, '').slice(0, 12).toUpperCase(),
    amount: { minor: 1050n, currency: 'USD' },
    idempotencyKey: `payment-${paymentId}`,
    fields: { return_url: 'https://shop.example.com/return?cart=7', cancel_url: 'https://shop.example.com/cancel' },
    ...overrides,
  };
}

/** What the buyer's browser does: follow the approval link with an outcome, without following the redirect. */
async function buyer(url: string, auto: 'approve' | 'cancel' | 'approve-decline' | 'approve-pending'): Promise<Response> {
  return fetch(`${url}&auto=${auto}`, { redirect: 'manual' });
}

function lookupOf(payment: CreatePaymentInput, result: ProviderPaymentResult) {
  return { paymentId: payment.paymentId, providerRef: result.providerRef, reference: payment.reference, providerData: result.data ?? {} };
}

function refundInput(payment: CreatePaymentInput, result: ProviderPaymentResult, amountMinor: bigint, key = randomUUID()): RefundInput {
  return {
    refundId: randomUUID(),
    payment: { ...lookupOf(payment, result), amount: payment.amount, receiptNumber: result.receiptNumber ?? null },
    amount: { minor: amountMinor, currency: payment.amount.currency },
    idempotencyKey: `refund-${key}`,
  };
}

async function providerError(promise: Promise<unknown>): Promise<ProviderError> {
  try {
    await promise;
  } catch (err) {
    if (err instanceof ProviderError) return err;
    throw err;
  }
  throw new Error('expected a ProviderError');
}

/** Creates an order, has the buyer approve it and captures it. */
async function capturedPayment(creds: WalletpayCredentials, input = paymentInput()) {
  const created = await adapter.createPayment(creds, input);
  expect((await buyer(created.nextAction!.url, 'approve')).status).toBe(302);
  const captured = await adapter.capturePayment(creds, { orderId: created.providerRef, idempotencyKey: `capture-${input.paymentId}` });
  return { input, created, captured };
}

describe('createPayment', () => {
  it('creates an order awaiting the buyer, with the approval link as next action', async () => {
    const creds = newCreds();
    const input = paymentInput();
    const result = await adapter.createPayment(creds, input);
    expect(result.status).toBe('pending');
    expect(result.providerRef).toMatch(/^[A-Z0-9]{17}$/);
    expect(result.nextAction).toEqual({ type: 'redirect', url: `${t.baseUrl}/sandbox/walletpay/checkoutnow?token=${result.providerRef}` });
    const raw = result.raw as { status: string; purchase_units: { amount: unknown; custom_id: string; invoice_id: string; reference_id: string }[] };
    expect(raw.status).toBe('PAYER_ACTION_REQUIRED');
    expect(raw.purchase_units[0]).toMatchObject({
      amount: { currency_code: 'USD', value: '10.50' },
      custom_id: input.paymentId,
      invoice_id: input.reference,
      reference_id: input.reference,
    });
  });

  it('writes amounts as PayPal takes them: two decimals, whole units for JPY and HUF, and reads them back as ours', async () => {
    const creds = newCreds();
    const amountOf = (r: ProviderPaymentResult) => (r.raw as { purchase_units: { amount: unknown }[] }).purchase_units[0]!.amount;
    const yen = await adapter.createPayment(creds, paymentInput({ amount: { minor: 1200n, currency: 'JPY' } }));
    expect(amountOf(yen)).toEqual({ currency_code: 'JPY', value: '1200' });
    // ISO 4217 gives HUF two digits; PayPal refuses any decimal point in HUF.
    const forint = await adapter.createPayment(creds, paymentInput({ amount: { minor: 100_000n, currency: 'HUF' } }));
    expect(amountOf(forint)).toEqual({ currency_code: 'HUF', value: '1000' });
    expect(forint.amount).toEqual({ minor: 100_000n, currency: 'HUF' });
  });

  it('a currency PayPal does not take, or a fraction of HUF, is refused here and nothing is sent', async () => {
    const creds = newCreds();
    const dinar = await providerError(adapter.createPayment(creds, paymentInput({ amount: { minor: 1234n, currency: 'KWD' } })));
    expect(dinar.kind).toBe('invalid_request');
    expect(dinar.message).toBe('walletpay cannot take 1.234 KWD (currency: walletpay cannot charge KWD)');
    const fraction = await providerError(adapter.createPayment(creds, paymentInput({ amount: { minor: 100_050n, currency: 'HUF' } })));
    expect(fraction.message).toContain('must be a whole number of HUF for walletpay');
    expect(await t.sql('SELECT id FROM sandbox_walletpay_orders WHERE client_id = $1', [creds.client_id])).toEqual([]);
  });

  it('returns the same order for the same idempotency key (PayPal-Request-Id)', async () => {
    const creds = newCreds();
    const input = paymentInput();
    const first = await adapter.createPayment(creds, input);
    const again = await adapter.createPayment(creds, { ...input, amount: { minor: 9999n, currency: 'USD' } });
    expect(again.providerRef).toBe(first.providerRef);
    const rows = await t.sql('SELECT id FROM sandbox_walletpay_orders WHERE client_id = $1', [creds.client_id]);
    expect(rows).toHaveLength(1);
  });

  it('refuses bad client credentials as an auth error', async () => {
    const err = await providerError(adapter.createPayment({ ...newCreds(), client_secret: 'bad-secret' }, paymentInput()));
    expect(err.kind).toBe('auth');
    expect(err.message).not.toContain('bad-secret');
  });
});

describe('approve and capture', () => {
  it('captures an approved order: completed, with the capture id', async () => {
    const creds = newCreds();
    const { input, created, captured } = await capturedPayment(creds);
    expect(captured.status).toBe('completed');
    expect(captured.providerRef).toBe(created.providerRef);
    expect(captured.data).toMatchObject({ orderId: created.providerRef, captureId: expect.stringMatching(/^[A-Z0-9]{17}$/), captureStatus: 'COMPLETED' });
    expect(captured.receiptNumber).toBe(captured.data!.captureId);
    expect(captured.nextAction).toBeNull();
    const capture = (captured.raw as { purchase_units: { payments: { captures: Record<string, unknown>[] } }[] }).purchase_units[0]!.payments.captures[0]!;
    expect(capture).toMatchObject({ status: 'COMPLETED', amount: { currency_code: 'USD', value: '10.50' }, final_capture: true, custom_id: input.paymentId });
    // The adapter asks for the full order (Prefer: return=representation; PayPal's default answer is minimal).
    expect(captured.raw).toMatchObject({ intent: 'CAPTURE', purchase_units: [{ amount: { currency_code: 'USD', value: '10.50' }, custom_id: input.paymentId }] });

    const synced = await adapter.getPayment(creds, lookupOf(input, created));
    expect(synced.status).toBe('completed');
    expect(synced.data!.captureId).toBe(captured.data!.captureId);
  });

  it('keeps an approved but uncaptured order pending, without a next action', async () => {
    const creds = newCreds();
    const input = paymentInput();
    const created = await adapter.createPayment(creds, input);
    await buyer(created.nextAction!.url, 'approve');
    const synced = await adapter.getPayment(creds, lookupOf(input, created));
    expect(synced.status).toBe('pending');
    expect((synced.raw as { status: string }).status).toBe('APPROVED');
    expect(synced.nextAction).toBeNull();
  });

  it('refuses a capture before the buyer approved: ORDER_NOT_APPROVED', async () => {
    const creds = newCreds();
    const created = await adapter.createPayment(creds, paymentInput());
    const err = await providerError(adapter.capturePayment(creds, { orderId: created.providerRef, idempotencyKey: randomUUID() }));
    expect(err.kind).toBe('invalid_request');
    expect(err.providerCode).toBe('ORDER_NOT_APPROVED');
  });

  it('refuses a second capture: ORDER_ALREADY_CAPTURED; the same key replays the first', async () => {
    const creds = newCreds();
    const { input, created, captured } = await capturedPayment(creds);
    const replay = await adapter.capturePayment(creds, { orderId: created.providerRef, idempotencyKey: `capture-${input.paymentId}` });
    expect(replay.status).toBe('completed');
    expect(replay.data!.captureId).toBe(captured.data!.captureId);
    const err = await providerError(adapter.capturePayment(creds, { orderId: created.providerRef, idempotencyKey: 'another-key' }));
    expect(err.kind).toBe('invalid_request');
    expect(err.providerCode).toBe('ORDER_ALREADY_CAPTURED');
    const captures = await t.sql('SELECT id FROM sandbox_walletpay_captures WHERE order_id = $1', [created.providerRef]);
    expect(captures).toHaveLength(1);
  });

  it('judges the capture, not the order: a declined capture fails the payment', async () => {
    const creds = newCreds();
    const input = paymentInput();
    const created = await adapter.createPayment(creds, input);
    await buyer(created.nextAction!.url, 'approve-decline');
    const captured = await adapter.capturePayment(creds, { orderId: created.providerRef, idempotencyKey: randomUUID() });
    expect((captured.raw as { status: string }).status).toBe('COMPLETED');
    expect(captured.status).toBe('failed');
    expect(captured.failureReason).toMatch(/DECLINED/);
  });

  it('keeps a capture held for review pending until it completes', async () => {
    const creds = newCreds();
    const input = paymentInput();
    const created = await adapter.createPayment(creds, input);
    await buyer(created.nextAction!.url, 'approve-pending');
    const captured = await adapter.capturePayment(creds, { orderId: created.providerRef, idempotencyKey: randomUUID() });
    expect(captured.status).toBe('pending');
    expect(captured.data!.captureStatus).toBe('PENDING');
    // The simulator completes it from an Agenda job a little later.
    const deadline = Date.now() + 15_000;
    let synced = await adapter.getPayment(creds, lookupOf(input, created));
    while (synced.status === 'pending' && Date.now() < deadline) {
      await new Promise((r) => setTimeout(r, 100));
      synced = await adapter.getPayment(creds, lookupOf(input, created));
    }
    expect(synced.status).toBe('completed');
  });

  it("keeps a payment the buyer cancelled at PayPal pending with its approval link; approved later, it captures", async () => {
    const creds = newCreds();
    const input = paymentInput();
    const created = await adapter.createPayment(creds, input);
    const res = await buyer(created.nextAction!.url, 'cancel');
    expect(res.status).toBe(302);
    expect(res.headers.get('location')).toBe(`https://shop.example.com/cancel?token=${created.providerRef}`);
    // PayPal does not void the order: it still awaits the buyer, who may come back.
    const synced = await adapter.getPayment(creds, lookupOf(input, created));
    expect(synced).toMatchObject({ status: 'pending', failureReason: null, nextAction: created.nextAction });
    expect((synced.raw as { status: string }).status).toBe('PAYER_ACTION_REQUIRED');
    const err = await providerError(adapter.capturePayment(creds, { orderId: created.providerRef, idempotencyKey: randomUUID() }));
    expect(err.providerCode).toBe('ORDER_NOT_APPROVED');

    expect((await buyer(created.nextAction!.url, 'approve')).status).toBe(302);
    const captured = await adapter.capturePayment(creds, { orderId: created.providerRef, idempotencyKey: randomUUID() });
    expect(captured.status).toBe('completed');
  });

  it("cannot see another client's order", async () => {
    const owner = newCreds();
    const input = paymentInput();
    const created = await adapter.createPayment(owner, input);
    const err = await providerError(adapter.getPayment(newCreds(), lookupOf(input, created)));
    expect(err.kind).toBe('invalid_request');
    expect(err.providerCode).toBe('INVALID_RESOURCE_ID');
  });
});

describe('getCapture (whose a capture is, for a refund event naming only the capture)', () => {
  it("shows the capture with its order id; an unknown capture (PayPal's 404) is null, another client's (its 403 PERMISSION_DENIED) not visible", async () => {
    const creds = newCreds();
    const { input, created, captured } = await capturedPayment(creds);
    const captureId = captured.data!.captureId as string;
    const capture = await adapter.getCapture(creds, captureId);
    expect(capture).toMatchObject({
      id: captureId,
      status: 'COMPLETED',
      amount: { currency_code: 'USD', value: '10.50' },
      custom_id: input.paymentId,
      supplementary_data: { related_ids: { order_id: created.providerRef } },
    });
    expect(await adapter.getCapture(creds, 'NOSUCHCAPTURE0001')).toBeNull();
    // Not "none": PayPal's 403 does not say whether it is another account's or these credentials lack the permission.
    expect(await adapter.getCapture(newCreds(), captureId)).toBe('not_visible');
  });
});

describe('refundPayment', () => {
  it('refunds partially, then the rest, then refuses more', async () => {
    const creds = newCreds();
    const { input, captured } = await capturedPayment(creds);
    const part = await adapter.refundPayment(creds, refundInput(input, captured, 300n));
    expect(part).toMatchObject({ status: 'completed', providerRef: expect.stringMatching(/^[A-Z0-9]{17}$/) });
    expect((part.raw as { amount: unknown }).amount).toEqual({ currency_code: 'USD', value: '3.00' });

    const tooMuch = await providerError(adapter.refundPayment(creds, refundInput(input, captured, 751n)));
    expect(tooMuch.kind).toBe('invalid_request');
    expect(tooMuch.providerCode).toBe('REFUND_AMOUNT_EXCEEDED');

    const rest = await adapter.refundPayment(creds, { ...refundInput(input, captured, 750n) });
    expect(rest.status).toBe('completed');
    const capture = await t.sql<{ status: string; refunded_minor: string }>('SELECT status, refunded_minor FROM sandbox_walletpay_captures WHERE id = $1', [captured.data!.captureId]);
    expect(capture[0]).toEqual({ status: 'REFUNDED', refunded_minor: '1050' });

    const again = await providerError(adapter.refundPayment(creds, refundInput(input, captured, 1n)));
    expect(again.providerCode).toBe('CAPTURE_FULLY_REFUNDED');
  });

  it('refunds the whole capture at once, and a retried refund is not repeated', async () => {
    const creds = newCreds();
    const { input, captured } = await capturedPayment(creds);
    const refund = { ...refundInput(input, captured, 1050n) };
    const first = await adapter.refundPayment(creds, refund);
    const retry = await adapter.refundPayment(creds, refund);
    expect(retry.providerRef).toBe(first.providerRef);
    const rows = await t.sql('SELECT id FROM sandbox_walletpay_refunds WHERE capture_id = $1', [captured.data!.captureId]);
    expect(rows).toHaveLength(1);
  });

  it("a refund of a capture PayPal still holds is refused PENDING_CAPTURE, naming it; nothing is refunded", async () => {
    const creds = newCreds();
    const { input, captured } = await capturedPayment(creds);
    await t.sql(`UPDATE sandbox_walletpay_captures SET status = 'PENDING', status_reason = 'ECHECK' WHERE id = $1`, [captured.data!.captureId]);
    const err = await providerError(adapter.refundPayment(creds, refundInput(input, captured, 100n)));
    expect(err).toMatchObject({ kind: 'invalid_request', providerCode: 'PENDING_CAPTURE', message: expect.stringContaining('422 PENDING_CAPTURE: Cannot initiate a refund as the capture is pending') });
    expect(await t.sql('SELECT id FROM sandbox_walletpay_refunds WHERE capture_id = $1', [captured.data!.captureId])).toEqual([]);
  });

  it('finds the capture from the order when the payment does not know its capture id', async () => {
    const creds = newCreds();
    const { input, captured } = await capturedPayment(creds);
    const refund = refundInput(input, captured, 100n);
    refund.payment.providerData = {};
    expect((await adapter.refundPayment(creds, refund)).status).toBe('completed');
  });

  it('findRefund (the refund sync): by the refund id, by our refund id (custom_id) on the order, null when there is none', async () => {
    const creds = newCreds();
    const { input, captured } = await capturedPayment(creds);
    const request = refundInput(input, captured, 400n);
    const made = await adapter.refundPayment(creds, request);
    const lookup = { refundId: request.refundId, payment: request.payment };

    const expected = { providerRef: made.providerRef, status: 'completed', amount: { minor: 400n, currency: 'USD' } };
    expect(await adapter.findRefund(creds, { ...lookup, providerRef: made.providerRef })).toMatchObject(expected);
    expect(await adapter.findRefund(creds, { ...lookup, providerRef: null })).toMatchObject(expected);
    expect(await adapter.findRefund(creds, { ...lookup, refundId: randomUUID(), providerRef: null })).toBeNull();
    const unknown = await providerError(adapter.findRefund(creds, { ...lookup, providerRef: 'UNKNOWNREFUND0001' }));
    expect(unknown.kind).toBe('invalid_request');
  });
});

describe('access tokens', () => {
  it('caches the token, and fetches a new one once when the provider says it expired', async () => {
    const creds = newCreds();
    const input = paymentInput();
    const created = await adapter.createPayment(creds, input);
    await adapter.getPayment(creds, lookupOf(input, created));
    const count = async () => (await t.sql<{ n: number }>('SELECT count(*)::int AS n FROM sandbox_walletpay_tokens WHERE client_id = $1', [creds.client_id]))[0]!.n;
    expect(await count()).toBe(1);

    await t.http.post('/sandbox/walletpay/_control/expire-tokens').send({}).expect(200);
    const synced = await adapter.getPayment(creds, lookupOf(input, created));
    expect(synced.status).toBe('pending');
    expect(await count()).toBe(2);
  });

  it('concurrent calls refused with the same expired token fetch one new token between them', async () => {
    const creds = newCreds();
    const input = paymentInput();
    const created = await adapter.createPayment(creds, input);
    const count = async () => (await t.sql<{ n: number }>('SELECT count(*)::int AS n FROM sandbox_walletpay_tokens WHERE client_id = $1', [creds.client_id]))[0]!.n;
    expect(await count()).toBe(1);

    await t.http.post('/sandbox/walletpay/_control/expire-tokens').send({ client_id: creds.client_id }).expect(200);
    const reads = await Promise.all(Array.from({ length: 6 }, () => adapter.getPayment(creds, lookupOf(input, created))));
    expect(reads.map((r) => r.status)).toEqual(Array(6).fill('pending'));
    expect(await count()).toBe(2);
  });
});

describe('provider outages', () => {
  const outage = (mode: 'ok' | 'error' | 'hang') => t.http.post('/sandbox/walletpay/_control/outage').send({ mode }).expect(200);

  it('turns an HTTP 500 into a ProviderError', async () => {
    const creds = newCreds();
    const input = paymentInput();
    const created = await adapter.createPayment(creds, input);
    await outage('error');
    try {
      const read = await providerError(adapter.getPayment(creds, lookupOf(input, created)));
      expect(read.kind).toBe('unavailable');
      const write = await providerError(adapter.capturePayment(creds, { orderId: created.providerRef, idempotencyKey: randomUUID() }));
      expect(write.kind).toBe('indeterminate');
      expect(write.providerCode).toBe('INTERNAL_SERVER_ERROR');
      const token = await providerError(adapter.createPayment(newCreds(), paymentInput()));
      expect(token.kind).toBe('unavailable');
    } finally {
      await outage('ok');
    }
  });

  it('gives up on a provider that does not answer: indeterminate', async () => {
    // Long enough for a loaded simulator's answers before the hang (300 ms was not, in CI), far below a hang.
    const impatient = new WalletpayAdapter({ ...t.service.container.config, providerTimeoutMs: 3_000 });
    const creds = newCreds();
    const input = paymentInput();
    const created = await impatient.createPayment(creds, input);
    await outage('hang');
    try {
      const err = await providerError(impatient.createPayment(creds, paymentInput()));
      expect(err.kind).toBe('indeterminate');
      expect(err.message).toMatch(/no answer within 3000 ms/);
    } finally {
      await outage('ok');
    }
    expect((await impatient.getPayment(creds, lookupOf(input, created))).status).toBe('pending');
  });
});

describe('a capture refused INSTRUMENT_DECLINED by a PayPal whose order stays APPROVED (a small server standing in for it)', () => {
  it('restores the approval link kept from creation, and the next capture goes with a new PayPal-Request-Id', async () => {
    const requestIds: string[] = [];
    const server = http.createServer((req, res) => {
      const send = (status: number, body: unknown) => res.writeHead(status, { 'Content-Type': 'application/json' }).end(JSON.stringify(body));
      req.resume();
      req.on('end', () => {
        if (req.url === '/v1/oauth2/token') return send(200, { access_token: 'A21AAfake', token_type: 'Bearer', expires_in: 32_400 });
        if (req.method === 'GET' && req.url === '/v2/checkout/orders/ORDER1') {
          // Approved: PayPal no longer lists an approve or payer-action link.
          return send(200, {
            id: 'ORDER1', status: 'APPROVED', purchase_units: [{ amount: { currency_code: 'USD', value: '10.00' } }],
            links: [{ href: 'https://api-m.paypal.com/v2/checkout/orders/ORDER1', rel: 'self', method: 'GET' }],
          });
        }
        if (req.method === 'POST' && req.url === '/v2/checkout/orders/ORDER1/capture') {
          const id = String(req.headers['paypal-request-id']);
          requestIds.push(id);
          // PayPal answers a repeated request id as it answered it first.
          if (id === 'capture-p1') {
            return send(422, { name: 'UNPROCESSABLE_ENTITY', details: [{ issue: 'INSTRUMENT_DECLINED', description: 'The instrument presented was either declined by the processor or bank.' }] });
          }
          return send(201, {
            id: 'ORDER1', status: 'COMPLETED',
            purchase_units: [{ payments: { captures: [{ id: 'CAPTURE1', status: 'COMPLETED', amount: { currency_code: 'USD', value: '10.00' } }] } }],
          });
        }
        send(404, { name: 'RESOURCE_NOT_FOUND' });
      });
    });
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
    try {
      const config = t.service.container.config;
      const port = walletpayProvider({ ...config, providerBaseUrls: { ...config.providerBaseUrls, walletpay: `http://127.0.0.1:${(server.address() as AddressInfo).port}` } });
      const creds = newCreds();
      const providerData = { orderId: 'ORDER1', approvalUrl: 'https://www.paypal.com/checkoutnow?token=ORDER1' };
      const amount = { minor: 1000n, currency: 'USD' };
      const refused = await providerError(port.capturePayment!(creds, { providerRef: 'ORDER1', idempotencyKey: 'capture-p1', providerData, amount }));
      expect(refused).toMatchObject({
        reason: 'reapprove',
        providerCode: 'INSTRUMENT_DECLINED',
        result: { status: 'pending', nextAction: { type: 'redirect', url: providerData.approvalUrl }, data: { declinedCaptures: 1 } },
      });
      const done = await port.capturePayment!(creds, { providerRef: 'ORDER1', idempotencyKey: 'capture-p1', providerData: { ...providerData, declinedCaptures: 1 }, amount });
      expect(done).toMatchObject({ status: 'completed', receiptNumber: 'CAPTURE1' });
      expect(requestIds).toEqual(['capture-p1', 'capture-p1-1']);
    } finally {
      await new Promise((resolve) => server.close(resolve));
    }
  });
});

/**
 * In front of the simulator: the orders named in `completedWithoutCapture` are answered (read or capture)
 * as PayPal may show them, COMPLETED with no capture listed — PayPal: a completed order "can indicate a
 * payment was authorized, an authorized payment was captured, or a payment was declined".
 */
class CompletedWithoutCapture extends ForwardingStub {
  readonly completedWithoutCapture = new Set<string>();

  protected override async intercept(req: StubRequest, forward: Forward): Promise<StubAnswer> {
    const answer = await forward();
    const order = /\/v2\/checkout\/orders\/([^/?]+)(?:\/capture)?(?:\?.*)?$/.exec(req.url)?.[1];
    if (!order || !this.completedWithoutCapture.has(order) || answer.status >= 300) return answer;
    const body = JSON.parse(answer.body.toString('utf8')) as { status: string; purchase_units?: { payments?: unknown }[] };
    body.status = 'COMPLETED';
    for (const unit of body.purchase_units ?? []) delete unit.payments;
    return { status: answer.status, headers: { 'Content-Type': 'application/json' }, body: JSON.stringify(body) };
  }
}

describe('an order COMPLETED that lists no capture (PayPal: check the capture, not the order)', () => {
  let stub: CompletedWithoutCapture;
  let stubbed: WalletpayAdapter;
  beforeAll(async () => {
    stub = new CompletedWithoutCapture();
    const stubUrl = await stub.start();
    stub.target = t.baseUrl;
    const config = t.service.container.config;
    stubbed = new WalletpayAdapter({ ...config, providerBaseUrls: { ...config.providerBaseUrls, walletpay: `${stubUrl}/sandbox/walletpay` } });
  });
  afterAll(async () => stub.stop());

  it('is not a completed payment: the status sync keeps it pending, with no capture id and no approval link', async () => {
    const creds = newCreds();
    const input = paymentInput();
    const created = await stubbed.createPayment(creds, input);
    expect((await buyer(created.nextAction!.url, 'approve')).status).toBe(302);
    stub.completedWithoutCapture.add(created.providerRef);

    const synced = await stubbed.getPayment(creds, lookupOf(input, created));
    expect((synced.raw as { status: string }).status).toBe('COMPLETED');
    expect(synced.status).toBe('pending'); // was completed: the amount the order asks for taken as paid
    expect(synced.receiptNumber).toBeNull();
    expect(synced.nextAction).toBeNull();
    expect(synced.data).toEqual({ orderId: created.providerRef });
  });

  it('a capture answered so (and the order read after it) is not completed either', async () => {
    const creds = newCreds();
    const input = paymentInput();
    const created = await stubbed.createPayment(creds, input);
    expect((await buyer(created.nextAction!.url, 'approve')).status).toBe(302);
    stub.completedWithoutCapture.add(created.providerRef);

    const captured = await stubbed.capturePayment(creds, { orderId: created.providerRef, idempotencyKey: `capture-${input.paymentId}` });
    expect(captured.status).toBe('pending'); // was completed
    expect(captured.receiptNumber).toBeNull();
    // Seen without the stub, PayPal's capture is there: the status sync's next read settles the payment.
    stub.completedWithoutCapture.delete(created.providerRef);
    expect(await stubbed.getPayment(creds, lookupOf(input, created))).toMatchObject({ status: 'completed', receiptNumber: expect.any(String) });
  });
});

/**
 * In front of the simulator: a request whose path ends with a swap's `asked` (and whose method is the
 * swap's) is sent on for `other` instead — with `requestId` as its PayPal-Request-Id when given, so a
 * write is answered with the replay of another one — as a cache or proxy mixing answers up would.
 */
class MixedUpAnswers extends ForwardingStub {
  /** `without`: the answer's top-level fields left out (what it names of itself). */
  swaps: { method: string; asked: string; other: string; requestId?: string; without?: string[] }[] = [];

  protected override async intercept(req: StubRequest, forward: Forward): Promise<StubAnswer> {
    const swap = this.swaps.find((s) => s.method === req.method && req.url.endsWith(s.asked));
    if (!swap) return forward();
    if (swap.requestId) req.headers['paypal-request-id'] = swap.requestId;
    const answer = await forward(`${this.target}${req.url.slice(0, -swap.asked.length)}${swap.other}`);
    if (!swap.without) return answer;
    const body = JSON.parse(answer.body.toString()) as Record<string, unknown>;
    for (const field of swap.without) delete body[field];
    return { ...answer, body: JSON.stringify(body) };
  }
}

describe('answers about something else than was asked (a cache or proxy mixing them up)', () => {
  let stub: MixedUpAnswers;
  let viaStub: WalletpayAdapter;
  beforeAll(async () => {
    stub = new MixedUpAnswers();
    stub.target = t.baseUrl;
    const stubUrl = await stub.start();
    const config = t.service.container.config;
    viaStub = new WalletpayAdapter({ ...config, providerBaseUrls: { ...config.providerBaseUrls, walletpay: `${stubUrl}/sandbox/walletpay` } });
  });
  afterAll(async () => stub.stop());
  async function swapped<T>(swaps: MixedUpAnswers['swaps'], call: () => Promise<T>): Promise<T> {
    stub.swaps = swaps;
    try {
      return await call();
    } finally {
      stub.swaps = [];
    }
  }

  it("a read of our order answered with another customer's captured order is not taken as ours (nor is its capture)", async () => {
    const creds = newCreds();
    const input = paymentInput();
    const created = await adapter.createPayment(creds, input);
    const other = await capturedPayment(creds);
    expect(await viaStub.getPayment(creds, lookupOf(input, created))).toMatchObject({ providerRef: created.providerRef, status: 'pending' });

    const order = { method: 'GET', asked: `/v2/checkout/orders/${created.providerRef}`, other: `/v2/checkout/orders/${other.created.providerRef}` };
    const err = await swapped([order], () => providerError(viaStub.getPayment(creds, lookupOf(input, created))));
    // Was: completed, with the other order's capture as our receipt.
    expect(err).toMatchObject({ kind: 'unavailable', message: expect.stringContaining(other.created.providerRef) });
  });

  it("a capture answered with another order's capture is not applied: its outcome is unknown (indeterminate)", async () => {
    const creds = newCreds();
    const input = paymentInput();
    const created = await adapter.createPayment(creds, input);
    expect((await buyer(created.nextAction!.url, 'approve')).status).toBe(302);
    const other = await capturedPayment(creds);

    const capture = {
      method: 'POST', asked: `/v2/checkout/orders/${created.providerRef}/capture`, other: `/v2/checkout/orders/${other.created.providerRef}/capture`, requestId: `capture-${other.input.paymentId}`,
    };
    const err = await swapped([capture], () => providerError(viaStub.capturePayment(creds, { orderId: created.providerRef, idempotencyKey: `capture-${input.paymentId}` })));
    // Was: completed as the other order, with its capture id (to which our refunds would then go).
    expect(err).toMatchObject({ kind: 'indeterminate', message: expect.stringContaining(other.created.providerRef) });
  });

  it("a creation answered with another payment's order is not taken as ours (indeterminate)", async () => {
    const creds = newCreds();
    const otherInput = paymentInput();
    const other = await adapter.createPayment(creds, otherInput);
    const input = paymentInput();
    const create = { method: 'POST', asked: '/v2/checkout/orders', other: '/v2/checkout/orders', requestId: otherInput.idempotencyKey };
    const err = await swapped([create], () => providerError(viaStub.createPayment(creds, input)));
    // Was: pending with the other payment's order id and approval link.
    expect(err).toMatchObject({ kind: 'indeterminate', message: expect.stringContaining(`payment ${otherInput.paymentId}`) });
    expect(err.message).toContain(other.providerRef);
  });

  it("a refund answered with another refund (of another capture) is not applied: its outcome is unknown (indeterminate)", async () => {
    const creds = newCreds();
    const ours = await capturedPayment(creds);
    const other = await capturedPayment(creds);
    const otherRequest = refundInput(other.input, other.captured, 1050n);
    const otherRefund = await adapter.refundPayment(creds, otherRequest);

    const refund = {
      method: 'POST',
      asked: `/v2/payments/captures/${ours.captured.receiptNumber}/refund`,
      other: `/v2/payments/captures/${other.captured.receiptNumber}/refund`,
      requestId: otherRequest.idempotencyKey,
    };
    const err = await swapped([refund], () => providerError(viaStub.refundPayment(creds, refundInput(ours.input, ours.captured, 300n))));
    // Was: completed, as the other customer's refund of 10.50.
    expect(err).toMatchObject({ kind: 'indeterminate', message: expect.stringContaining(otherRefund.providerRef!) });
  });

  it("a refund answered with a refund naming neither our refund (custom_id) nor a capture (no `up` link) is not taken as ours (indeterminate)", async () => {
    const creds = newCreds();
    const ours = await capturedPayment(creds);
    const other = await capturedPayment(creds);
    const otherRequest = refundInput(other.input, other.captured, 1050n);
    await adapter.refundPayment(creds, otherRequest);
    const ourCapture = `/v2/payments/captures/${ours.captured.receiptNumber}/refund`;

    const refund = { method: 'POST', asked: ourCapture, other: `/v2/payments/captures/${other.captured.receiptNumber}/refund`, requestId: otherRequest.idempotencyKey, without: ['custom_id', 'links'] };
    const err = await swapped([refund], () => providerError(viaStub.refundPayment(creds, refundInput(ours.input, ours.captured, 300n))));
    // Was: completed, as the other customer's refund of 10.50.
    expect(err).toMatchObject({ kind: 'indeterminate', message: expect.stringContaining('no capture') });
    // custom_id is optional in PayPal's refund (a minimal answer has none): our refund's answer without it, its
    // `up` link naming our capture, is ours.
    const withoutCustomId = { method: 'POST', asked: ourCapture, other: ourCapture, without: ['custom_id'] };
    expect(await swapped([withoutCustomId], () => viaStub.refundPayment(creds, refundInput(ours.input, ours.captured, 300n))))
      .toMatchObject({ status: 'completed', amount: { minor: 300n, currency: 'USD' } });
  });

  it('the refund sync does not take another refund, or another order, as an answer about ours', async () => {
    const creds = newCreds();
    const ours = await capturedPayment(creds);
    const request = refundInput(ours.input, ours.captured, 300n);
    const made = await adapter.refundPayment(creds, request);
    const other = await capturedPayment(creds);
    const otherRefund = await adapter.refundPayment(creds, refundInput(other.input, other.captured, 1050n));
    const lookup = { refundId: request.refundId, payment: request.payment };

    const byId = { method: 'GET', asked: `/v2/payments/refunds/${made.providerRef}`, other: `/v2/payments/refunds/${otherRefund.providerRef}` };
    // Was: the other refund (10.50) reported as ours.
    expect(await swapped([byId], () => providerError(viaStub.findRefund(creds, { ...lookup, providerRef: made.providerRef })))).toMatchObject({ kind: 'unavailable' });
    const byOrder = { method: 'GET', asked: `/v2/checkout/orders/${ours.created.providerRef}`, other: `/v2/checkout/orders/${other.created.providerRef}` };
    // Was: null, "no such refund", for a refund that was made.
    expect(await swapped([byOrder], () => providerError(viaStub.findRefund(creds, { ...lookup, providerRef: null })))).toMatchObject({ kind: 'unavailable' });
    expect(await viaStub.findRefund(creds, { ...lookup, providerRef: null })).toMatchObject({ providerRef: made.providerRef, amount: { minor: 300n, currency: 'USD' } });
  });

  it("a read of a capture answered with another capture does not say whose ours is (unavailable, not the other's order)", async () => {
    const creds = newCreds();
    const ours = await capturedPayment(creds);
    const other = await capturedPayment(creds);
    const capture = { method: 'GET', asked: `/v2/payments/captures/${ours.captured.receiptNumber}`, other: `/v2/payments/captures/${other.captured.receiptNumber}` };
    // Was: the other capture, whose order a refund event of ours would then be applied to.
    expect(await swapped([capture], () => providerError(viaStub.getCapture(creds, ours.captured.receiptNumber!)))).toMatchObject({ kind: 'unavailable' });
  });
});
