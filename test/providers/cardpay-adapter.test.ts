import { randomUUID } from 'node:crypto';
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import { CardpayAdapter, prepareCardpayCredentials } from '../../server/providers/cardpay/adapter.js';
import { parseCardpayEvent, verifyCardpaySignature } from '../../server/providers/cardpay/webhook.js';
import type { CreatePaymentInput, ProviderPaymentResult, RefundInput } from '../../server/domain/ports.js';
import { ProviderError } from '../../server/domain/ports.js';
import { ForwardingStub, type Forward, type StubAnswer, type StubRequest } from '../support/forwarding-stub.js';
import { startTestService, type TestService } from '../support/service.js';

/**
 * The cardpay adapter (official stripe SDK) against the cardpay simulator over real HTTP: charges,
 * declines, 3-D Secure, saved cards, refunds, idempotency, signed events, outages.
 */
let t: TestService;
let adapter: CardpayAdapter;
beforeAll(async () => {
  // 5 s: 20 concurrent calls with one key are answered one at a time (409 idempotency_key_in_use, retried
  // by stripe-node), which outlasted 1 s on a loaded host (CI at d132fab). The hang case waits it out.
  t = await startTestService({ PROVIDER_TIMEOUT_MS: '5000' });
  adapter = new CardpayAdapter(t.service.container.config);
});
afterAll(async () => t.stop());

/** Each test its own secret key: its own tenant at the simulator. */
const newCreds = () => ({ secret_key: `sk_test_${randomUUID().replace(/-/g, '')}` });

function paymentInput(fields: Record<string, unknown>, minor = 1050n, currency = 'USD'): CreatePaymentInput {
  const paymentId = randomUUID();
  return {
    paymentId,
    reference: paymentId.replace(/-/g, '').slice(0, 12).toUpperCase(),
    amount: { minor, currency },
    idempotencyKey: `payment-${paymentId}`,
    fields,
  };
}

async function providerError(promise: Promise<unknown>): Promise<ProviderError> {
  try {
    await promise;
  } catch (err) {
    expect(err).toBeInstanceOf(ProviderError);
    return err as ProviderError;
  }
  throw new Error('expected a ProviderError');
}

async function eventually<T>(fn: () => Promise<T | undefined> | T | undefined, what: string, timeoutMs = 15_000): Promise<T> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const value = await fn();
    if (value !== undefined) return value;
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 50));
  }
}

function refundInput(payment: ProviderPaymentResult, paymentInputUsed: CreatePaymentInput, minor: bigint): RefundInput {
  const refundId = randomUUID();
  return {
    refundId,
    payment: {
      paymentId: paymentInputUsed.paymentId,
      providerRef: payment.providerRef,
      reference: paymentInputUsed.reference,
      providerData: {},
      amount: paymentInputUsed.amount,
      receiptNumber: null,
    },
    amount: { minor, currency: paymentInputUsed.amount.currency },
    idempotencyKey: `refund-${refundId}`,
  };
}

describe('one-time charges', () => {
  it.each(['pm_card_visa', 'pm_card_mastercard', 'pm_card_amex'])('%s succeeds: completed, with the intent as raw (no client secret)', async (token) => {
    const input = paymentInput({ payment_method: token });
    const result = await adapter.createPayment(newCreds(), input);
    expect(result.status).toBe('completed');
    expect(result.providerRef).toMatch(/^pi_/);
    expect(result.nextAction).toBeNull();
    expect(result.failureReason).toBeNull();
    const raw = result.raw as Record<string, unknown>;
    expect(raw).toMatchObject({ object: 'payment_intent', status: 'succeeded', amount: 1050, currency: 'usd', amount_received: 1050 });
    expect(raw.metadata).toEqual({ payment_id: input.paymentId, reference: input.reference });
    expect(raw).not.toHaveProperty('client_secret');
    // Confirmed with the service's own return page (the merchant gave none), as the current API requires.
    expect(raw.automatic_payment_methods).toEqual({ enabled: true, allow_redirects: 'always' });
  });

  it.each([
    ['pm_card_chargeDeclined', 'generic_decline', 'Your card was declined.'],
    ['pm_card_visa_chargeDeclined', 'generic_decline', 'Your card was declined.'],
    ['pm_card_visa_chargeDeclinedInsufficientFunds', 'insufficient_funds', 'Your card has insufficient funds.'],
  ])('%s is declined with the failed intent attached', async (token, code, message) => {
    const err = await providerError(adapter.createPayment(newCreds(), paymentInput({ payment_method: token })));
    expect(err.kind).toBe('declined');
    expect(err.providerCode).toBe(code);
    expect(err.message).toBe(message);
    expect(err.result).toMatchObject({ status: 'failed', failureReason: message });
    expect(err.result!.providerRef).toMatch(/^pi_/);
    expect(err.result!.raw).toMatchObject({ status: 'requires_payment_method', last_payment_error: { code: 'card_declined', decline_code: code } });
  });

  it('an unknown payment method token is an invalid request naming it', async () => {
    const err = await providerError(adapter.createPayment(newCreds(), paymentInput({ payment_method: 'pm_card_doesNotExist' })));
    expect(err.kind).toBe('invalid_request');
    expect(err.message).toContain("No such PaymentMethod: 'pm_card_doesNotExist'");
    expect(err.providerCode).toBe('resource_missing');
  });

  it('a refused secret key is an auth error', async () => {
    const err = await providerError(adapter.createPayment({ secret_key: 'sk_test_invalid_key_1234' }, paymentInput({ payment_method: 'pm_card_visa' })));
    expect(err.kind).toBe('auth');
    expect(err.message).not.toContain('sk_test_invalid_key_1234');
  });

  it('getPayment reads the intent by id, or finds it by our payment id when the id is unknown', async () => {
    const creds = newCreds();
    const input = paymentInput({ payment_method: 'pm_card_visa' });
    const created = await adapter.createPayment(creds, input);
    const lookup = { paymentId: input.paymentId, reference: input.reference, providerData: {} };
    expect(await adapter.getPayment(creds, { ...lookup, providerRef: created.providerRef })).toMatchObject({ providerRef: created.providerRef, status: 'completed' });
    expect(await adapter.getPayment(creds, { ...lookup, providerRef: null })).toMatchObject({ providerRef: created.providerRef, status: 'completed' });
    const missing = await providerError(adapter.getPayment(creds, { ...lookup, paymentId: randomUUID(), providerRef: null }));
    expect(missing.providerCode).toBe('resource_missing');
    // Another key cannot see it.
    const other = await providerError(adapter.getPayment(newCreds(), { ...lookup, providerRef: created.providerRef }));
    expect(other.kind).toBe('invalid_request');
  });
});

describe('3-D Secure', () => {
  const returnUrl = 'https://shop.example.com/return?order=42';
  /** The simulator's 3-D Secure page of an intent: its id and the page's secret, as Stripe's capability URL. */
  const threeDsPage = (providerRef: string) => expect.stringMatching(new RegExp(`^${t.baseUrl}/sandbox/cardpay/3ds/${providerRef}\\?client_secret=src_client_secret_[A-Za-z0-9]{24}$`));

  async function requireAction(creds: { secret_key: string }, token = 'pm_card_threeDSecureRequired') {
    const input = paymentInput({ payment_method: token, return_url: returnUrl });
    const result = await adapter.createPayment(creds, input);
    expect(result.status).toBe('pending');
    expect(result.nextAction).toEqual({ type: 'redirect', url: threeDsPage(result.providerRef!) });
    expect(result.raw).toMatchObject({
      status: 'requires_action',
      next_action: { type: 'redirect_to_url', redirect_to_url: { url: result.nextAction!.url, return_url: returnUrl } },
    });
    return { input, result };
  }

  it('requires_action → &auto=complete redirects to the return_url and the payment is completed', async () => {
    const creds = newCreds();
    const { input, result } = await requireAction(creds);
    const page = await fetch(`${result.nextAction!.url}&auto=complete`, { redirect: 'manual' });
    expect(page.status).toBe(302);
    const location = new URL(page.headers.get('location')!);
    expect(`${location.origin}${location.pathname}`).toBe('https://shop.example.com/return');
    expect(location.searchParams.get('order')).toBe('42');
    expect(location.searchParams.get('payment_intent')).toBe(result.providerRef);
    expect(location.searchParams.get('redirect_status')).toBe('succeeded');
    const synced = await adapter.getPayment(creds, { paymentId: input.paymentId, providerRef: result.providerRef, reference: input.reference, providerData: {} });
    expect(synced).toMatchObject({ status: 'completed', nextAction: null });
  });

  it('&auto=fail leaves the intent failed with the authentication failure as the reason', async () => {
    const creds = newCreds();
    const { input, result } = await requireAction(creds, 'pm_card_threeDSecure2Required');
    const page = await fetch(`${result.nextAction!.url}&auto=fail`, { redirect: 'manual' });
    expect(page.status).toBe(302);
    expect(new URL(page.headers.get('location')!).searchParams.get('redirect_status')).toBe('failed');
    const synced = await adapter.getPayment(creds, { paymentId: input.paymentId, providerRef: result.providerRef, reference: input.reference, providerData: {} });
    expect(synced.status).toBe('failed');
    expect(synced.failureReason).toMatch(/failed authentication/);
  });

  it('the page has Complete and Fail buttons; its forms settle the intent once', async () => {
    const creds = newCreds();
    const { result } = await requireAction(creds);
    const { pathname: path, search } = new URL(result.nextAction!.url);
    const html = await t.http.get(`${path}${search}`).expect(200);
    expect(html.text).toContain('Complete');
    expect(html.text).toContain('Fail');
    // The forms keep the page's secret.
    expect(html.text).toContain(`action="${result.providerRef}/complete${search}"`);
    expect(html.text).toContain(`action="${result.providerRef}/fail${search}"`);
    await t.http.post(`${path}/complete${search}`).expect(302);
    // A second settlement changes nothing.
    const again = await t.http.post(`${path}/fail${search}`).expect(302);
    expect(new URL(again.headers.location!).searchParams.get('redirect_status')).toBe('succeeded');
    const [row] = await t.sql<{ status: string }>('SELECT status FROM sandbox_cardpay_intents WHERE id = $1', [result.providerRef]);
    expect(row!.status).toBe('succeeded');
  });

  it("without the merchant's return_url the intent is confirmed with the service's return page: redirect_to_url, which lands there", async () => {
    const serviceReturn = `${t.baseUrl}/return/cardpay`;
    const result = await adapter.createPayment(newCreds(), paymentInput({ payment_method: 'pm_card_threeDSecureRequired' }));
    expect(result.status).toBe('pending');
    expect(result.raw).toMatchObject({ next_action: { type: 'redirect_to_url', redirect_to_url: { return_url: serviceReturn } } });
    expect(result.nextAction?.url).toEqual(threeDsPage(result.providerRef!));
    const page = await fetch(`${result.nextAction!.url}&auto=complete`, { redirect: 'manual' });
    const location = new URL(page.headers.get('location')!);
    expect(`${location.origin}${location.pathname}`).toBe(serviceReturn);
    const landing = await fetch(location);
    expect(landing.status).toBe(200);
    expect(await landing.text()).toContain('you can close this window');
  });

  it('a next action other than redirect_to_url (use_stripe_sdk, internal to the JS library) is not followed', async () => {
    const { toPaymentResult } = await import('../../server/providers/cardpay/transformers.js');
    const result = toPaymentResult({
      id: 'pi_x',
      status: 'requires_action',
      last_payment_error: null,
      next_action: { type: 'use_stripe_sdk', use_stripe_sdk: { stripe_js: 'https://hooks.example/3ds' } },
    } as never);
    expect(result).toMatchObject({ status: 'pending', nextAction: null });
  });
});

describe('saved cards and off-session charges', () => {
  async function saveCard(creds: { secret_key: string }, token: string) {
    const { customerId } = await adapter.createCustomer(creds, { email: 'ann@example.com', name: 'Ann', savedCardId: randomUUID(), idempotencyKey: `cus-${randomUUID()}` });
    const card = await adapter.attachPaymentMethod(creds, { paymentMethodId: token, customerId, idempotencyKey: `attach-${randomUUID()}` });
    return { customerId, card };
  }

  it('a customer with an attached card is charged off-session', async () => {
    const creds = newCreds();
    const { customerId, card } = await saveCard(creds, 'pm_card_visa');
    expect(customerId).toMatch(/^cus_/);
    expect(card).toEqual({ paymentMethodId: expect.stringMatching(/^pm_/), brand: 'visa', last4: '4242', expMonth: 12, expYear: expect.any(Number) });
    expect(card.paymentMethodId).not.toBe('pm_card_visa');
    const result = await adapter.createPayment(creds, paymentInput({ payment_method: card.paymentMethodId, customer: customerId, off_session: true }));
    expect(result.status).toBe('completed');
    expect(result.raw).toMatchObject({ customer: customerId, payment_method: card.paymentMethodId });
  });

  it('pm_card_chargeCustomerFail attaches, then its charge declines', async () => {
    const creds = newCreds();
    const { customerId, card } = await saveCard(creds, 'pm_card_chargeCustomerFail');
    expect(card.last4).toBe('0341');
    const err = await providerError(adapter.createPayment(creds, paymentInput({ payment_method: card.paymentMethodId, customer: customerId, off_session: true })));
    expect(err.kind).toBe('declined');
    expect(err.result?.status).toBe('failed');
  });

  it('a 3-D Secure card charged off-session fails with authentication_required', async () => {
    const creds = newCreds();
    const { customerId, card } = await saveCard(creds, 'pm_card_threeDSecureRequired');
    const err = await providerError(adapter.createPayment(creds, paymentInput({ payment_method: card.paymentMethodId, customer: customerId, off_session: true })));
    expect(err.kind).toBe('declined');
    expect(err.providerCode).toBe('authentication_required');
    expect(err.result?.status).toBe('failed');
  });

  it('a decline card cannot be attached', async () => {
    const creds = newCreds();
    const { customerId } = await adapter.createCustomer(creds, { savedCardId: randomUUID(), idempotencyKey: `cus-${randomUUID()}` });
    const err = await providerError(adapter.attachPaymentMethod(creds, { paymentMethodId: 'pm_card_chargeDeclined', customerId, idempotencyKey: `a-${randomUUID()}` }));
    expect(err.kind).toBe('declined');
    expect(err.providerCode).toBe('generic_decline');
  });

  it('detaching works once and again (already detached counts as done); a detached card cannot be charged', async () => {
    const creds = newCreds();
    const { customerId, card } = await saveCard(creds, 'pm_card_mastercard');
    await adapter.detachPaymentMethod(creds, card.paymentMethodId);
    await adapter.detachPaymentMethod(creds, card.paymentMethodId);
    const [row] = await t.sql<{ customer: string | null; detached: boolean }>('SELECT customer, detached FROM sandbox_cardpay_payment_methods WHERE id = $1', [card.paymentMethodId]);
    expect(row).toEqual({ customer: null, detached: true });
    const err = await providerError(adapter.createPayment(creds, paymentInput({ payment_method: card.paymentMethodId, customer: customerId, off_session: true })));
    expect(err.kind).toBe('invalid_request');
  });
});

describe('refunds', () => {
  it('partial, then the remainder, then nothing is left to refund', async () => {
    const creds = newCreds();
    const input = paymentInput({ payment_method: 'pm_card_visa' }, 1000n);
    const payment = await adapter.createPayment(creds, input);

    const partial = await adapter.refundPayment(creds, refundInput(payment, input, 300n));
    expect(partial).toMatchObject({ status: 'completed', failureReason: null });
    expect(partial.providerRef).toMatch(/^re_/);
    expect(partial.raw).toMatchObject({ object: 'refund', amount: 300, currency: 'usd', payment_intent: payment.providerRef, status: 'succeeded' });

    const over = await providerError(adapter.refundPayment(creds, refundInput(payment, input, 800n)));
    expect(over.kind).toBe('invalid_request');
    expect(over.providerCode).toBe('amount_too_large');

    const rest = await adapter.refundPayment(creds, refundInput(payment, input, 700n));
    expect(rest.raw).toMatchObject({ amount: 700, status: 'succeeded' });

    const none = await providerError(adapter.refundPayment(creds, refundInput(payment, input, 1n)));
    expect(none.kind).toBe('invalid_request');
    expect(none.providerCode).toBe('charge_already_refunded');

    const [intent] = await t.sql<{ amount_refunded: string }>('SELECT amount_refunded FROM sandbox_cardpay_intents WHERE id = $1', [payment.providerRef]);
    expect(intent!.amount_refunded).toBe('1000');
  });

  it('a refund of a declined payment is refused', async () => {
    const creds = newCreds();
    const input = paymentInput({ payment_method: 'pm_card_chargeDeclined' });
    const declined = await providerError(adapter.createPayment(creds, input));
    const err = await providerError(adapter.refundPayment(creds, refundInput(declined.result!, input, 100n)));
    expect(err.kind).toBe('invalid_request');
  });

  it('findRefund (the refund sync): by the refund id, by our refund id among the intent\'s refunds, null when there is none', async () => {
    const creds = newCreds();
    const input = paymentInput({ payment_method: 'pm_card_visa' }, 1000n);
    const payment = await adapter.createPayment(creds, input);
    const request = refundInput(payment, input, 300n);
    const made = await adapter.refundPayment(creds, request);
    const lookup = { refundId: request.refundId, payment: request.payment };

    const expected = { providerRef: made.providerRef, status: 'completed', amount: { minor: 300n, currency: 'USD' } };
    expect(await adapter.findRefund(creds, { ...lookup, providerRef: made.providerRef })).toMatchObject(expected);
    expect(await adapter.findRefund(creds, { ...lookup, providerRef: null })).toMatchObject(expected);
    expect(await adapter.findRefund(creds, { ...lookup, refundId: randomUUID(), providerRef: null })).toBeNull();
    const unknown = await providerError(adapter.findRefund(creds, { ...lookup, providerRef: 're_unknown000000000000000' }));
    expect(unknown.kind).toBe('invalid_request');
  });
});

describe('idempotency', () => {
  const intentCount = async (paymentId: string) =>
    Number((await t.sql<{ n: string }>(`SELECT count(*) AS n FROM sandbox_cardpay_intents WHERE metadata->>'payment_id' = $1`, [paymentId]))[0]!.n);

  it('the same key twice gives the same intent, stored once', async () => {
    const creds = newCreds();
    const input = paymentInput({ payment_method: 'pm_card_visa' });
    const first = await adapter.createPayment(creds, input);
    const second = await adapter.createPayment(creds, input);
    expect(second.providerRef).toBe(first.providerRef);
    expect(await intentCount(input.paymentId)).toBe(1);
  });

  it('20 concurrent calls with one key create one intent', async () => {
    const creds = newCreds();
    const input = paymentInput({ payment_method: 'pm_card_visa' });
    const results = await Promise.all(Array.from({ length: 20 }, () => adapter.createPayment(creds, input)));
    expect(new Set(results.map((r) => r.providerRef)).size).toBe(1);
    expect(results.every((r) => r.status === 'completed')).toBe(true);
    expect(await intentCount(input.paymentId)).toBe(1);
  });

  it('a decline is replayed as the same decline', async () => {
    const creds = newCreds();
    const input = paymentInput({ payment_method: 'pm_card_chargeDeclined' });
    const first = await providerError(adapter.createPayment(creds, input));
    const second = await providerError(adapter.createPayment(creds, input));
    expect(second.kind).toBe('declined');
    expect(second.result?.providerRef).toBe(first.result?.providerRef);
    expect(await intentCount(input.paymentId)).toBe(1);
  });

  it('the same key with different parameters is refused', async () => {
    const creds = newCreds();
    const input = paymentInput({ payment_method: 'pm_card_visa' });
    await adapter.createPayment(creds, input);
    const err = await providerError(adapter.createPayment(creds, { ...input, amount: { minor: 2000n, currency: 'USD' } }));
    expect(err.kind).toBe('invalid_request');
    expect(err.message).toContain('Keys for idempotent requests can only be used with the same parameters');
    expect(await intentCount(input.paymentId)).toBe(1);
  });
});

describe('webhook endpoints and signed events', () => {
  interface Received {
    headers: http.IncomingHttpHeaders;
    rawBody: Buffer;
  }
  const received: Received[] = [];
  /** Statuses to answer with, in order; then 200. */
  const answers: number[] = [];
  let receiver: http.Server;
  let receiverUrl: string;

  beforeAll(async () => {
    receiver = http.createServer((req, res) => {
      const chunks: Buffer[] = [];
      req.on('data', (c: Buffer) => chunks.push(c));
      req.on('end', () => {
        received.push({ headers: req.headers, rawBody: Buffer.concat(chunks) });
        res.statusCode = answers.shift() ?? 200;
        res.end('ok');
      });
    });
    await new Promise<void>((resolve) => receiver.listen(0, '127.0.0.1', resolve));
    receiverUrl = `http://127.0.0.1:${(receiver.address() as AddressInfo).port}/hooks/cardpay`;
  });
  afterAll(async () => new Promise<void>((resolve) => receiver.close(() => resolve())));

  const eventsOfType = (type: string, intentOrCharge?: (obj: Record<string, unknown>) => boolean) =>
    received.filter((r) => {
      const body = JSON.parse(r.rawBody.toString('utf8')) as { type: string; data: { object: Record<string, unknown> } };
      return body.type === type && (!intentOrCharge || intentOrCharge(body.data.object));
    });

  it('registers an endpoint; success, decline and refund events arrive signed with its secret', async () => {
    const creds = newCreds();
    const endpoint = await adapter.createWebhookEndpoint(creds, receiverUrl, randomUUID());
    expect(endpoint.id).toMatch(/^we_/);
    expect(endpoint.secret).toMatch(/^whsec_/);

    const input = paymentInput({ payment_method: 'pm_card_visa' });
    const payment = await adapter.createPayment(creds, input);
    const [delivery] = await eventually(() => {
      const hits = eventsOfType('payment_intent.succeeded', (o) => o.id === payment.providerRef);
      return hits.length ? hits : undefined;
    }, 'payment_intent.succeeded');
    const header = delivery!.headers['cardpay-signature'] as string;
    expect(header).toMatch(/^t=\d+,v1=[0-9a-f]{64}$/);
    expect(verifyCardpaySignature(delivery!.rawBody, header, endpoint.secret)).toBe(true);
    expect(verifyCardpaySignature(delivery!.rawBody, header, 'whsec_other')).toBe(false);
    const event = JSON.parse(delivery!.rawBody.toString('utf8'));
    expect(event).toMatchObject({ object: 'event', livemode: false, api_version: expect.any(String), created: expect.any(Number) });
    expect(event.id).toMatch(/^evt_/);
    expect(parseCardpayEvent(event)).toMatchObject({
      kind: 'payment',
      eventId: event.id,
      type: 'payment_intent.succeeded',
      paymentIntentId: payment.providerRef,
      paymentId: input.paymentId,
      status: 'completed',
      failureReason: null,
    });

    const declinedInput = paymentInput({ payment_method: 'pm_card_visa_chargeDeclinedInsufficientFunds' });
    const declined = await providerError(adapter.createPayment(creds, declinedInput));
    const [failed] = await eventually(() => {
      const hits = eventsOfType('payment_intent.payment_failed', (o) => o.id === declined.result!.providerRef);
      return hits.length ? hits : undefined;
    }, 'payment_intent.payment_failed');
    expect(verifyCardpaySignature(failed!.rawBody, failed!.headers['cardpay-signature'] as string, endpoint.secret)).toBe(true);
    expect(parseCardpayEvent(JSON.parse(failed!.rawBody.toString('utf8')))).toMatchObject({
      kind: 'payment',
      paymentId: declinedInput.paymentId,
      status: 'failed',
      failureReason: 'Your card has insufficient funds.',
    });

    await adapter.refundPayment(creds, refundInput(payment, input, 250n));
    const [refundDelivery] = await eventually(() => {
      const hits = eventsOfType('charge.refunded', (o) => o.payment_intent === payment.providerRef);
      return hits.length ? hits : undefined;
    }, 'charge.refunded');
    expect(verifyCardpaySignature(refundDelivery!.rawBody, refundDelivery!.headers['cardpay-signature'] as string, endpoint.secret)).toBe(true);
    const refundEvent = parseCardpayEvent(JSON.parse(refundDelivery!.rawBody.toString('utf8')));
    expect(refundEvent).toMatchObject({ kind: 'refund', paymentIntentId: payment.providerRef, chargeId: expect.stringMatching(/^ch_/) });
    // The charge no longer embeds its refunds (API ≥ 2022-11-15): they are listed by charge.
    expect(JSON.parse(refundDelivery!.rawBody.toString('utf8')).data.object).not.toHaveProperty('refunds');
    const listed = await adapter.listChargeRefunds(creds, refundEvent.kind === 'refund' ? refundEvent.chargeId : '');
    expect(listed).toEqual([
      expect.objectContaining({ providerRef: expect.stringMatching(/^re_/), status: 'completed', amount: { minor: 250n, currency: 'USD' }, ourRefundId: expect.any(String) }),
    ]);

    // The refund's own event may come after the charge's (CI at 647c83a: asserted before it arrived).
    await eventually(() => {
      const hits = eventsOfType('refund.created', (o) => o.payment_intent === payment.providerRef);
      return hits.length ? hits : undefined;
    }, 'refund.created');
    // Only the subscribed types were sent (no payment_intent.created, charge.succeeded, …).
    expect(new Set(received.map((r) => JSON.parse(r.rawBody.toString('utf8')).type))).toEqual(
      new Set(['payment_intent.succeeded', 'payment_intent.payment_failed', 'charge.refunded', 'refund.created']),
    );
    // refund.* events name the refund's charge: the same list is read for them.
    const created = received.find((r) => JSON.parse(r.rawBody.toString('utf8')).type === 'refund.created')!;
    expect(parseCardpayEvent(JSON.parse(created.rawBody.toString('utf8')))).toMatchObject({
      kind: 'refund', type: 'refund.created', paymentIntentId: payment.providerRef, chargeId: refundEvent.kind === 'refund' ? refundEvent.chargeId : '',
    });
  });

  it('a 3-D Secure settlement sends its event too', async () => {
    const creds = newCreds();
    const endpoint = await adapter.createWebhookEndpoint(creds, receiverUrl, randomUUID());
    const result = await adapter.createPayment(creds, paymentInput({ payment_method: 'pm_card_threeDSecureRequired', return_url: 'https://shop.example.com/r' }));
    await fetch(`${result.nextAction!.url}&auto=complete`, { redirect: 'manual' });
    const [delivery] = await eventually(() => {
      const hits = eventsOfType('payment_intent.succeeded', (o) => o.id === result.providerRef);
      return hits.length ? hits : undefined;
    }, '3DS success event');
    expect(verifyCardpaySignature(delivery!.rawBody, delivery!.headers['cardpay-signature'] as string, endpoint.secret)).toBe(true);
  });

  it('a receiver that answers non-2xx gets the same event again', async () => {
    const creds = newCreds();
    await adapter.createWebhookEndpoint(creds, receiverUrl, randomUUID());
    answers.push(500, 503);
    const payment = await adapter.createPayment(creds, paymentInput({ payment_method: 'pm_card_visa' }));
    const deliveries = await eventually(() => {
      const hits = eventsOfType('payment_intent.succeeded', (o) => o.id === payment.providerRef);
      return hits.length >= 3 ? hits : undefined;
    }, 'three delivery attempts');
    const ids = deliveries.map((d) => JSON.parse(d.rawBody.toString('utf8')).id);
    expect(new Set(ids).size).toBe(1);
  });

  it('an endpoint created again under the same idempotency key is the same endpoint; the older ones at the URL are deleted only when asked', async () => {
    const creds = newCreds();
    const first = await adapter.createWebhookEndpoint(creds, receiverUrl, randomUUID());
    const key = randomUUID();
    const second = await adapter.createWebhookEndpoint(creds, receiverUrl, key);
    // A repeat whose first answer was lost: the same endpoint and secret, no third endpoint.
    expect(await adapter.createWebhookEndpoint(creds, receiverUrl, key)).toEqual(second);
    expect(second.secret).not.toBe(first.secret);
    const atUrl = () => t.sql<{ id: string }>('SELECT id FROM sandbox_cardpay_webhook_endpoints WHERE url = $1 AND id IN ($2, $3) ORDER BY created, id', [receiverUrl, first.id, second.id]);
    expect((await atUrl()).map((r) => r.id).sort()).toEqual([first.id, second.id].sort());
    expect(await adapter.removeOtherWebhookEndpoints(creds, receiverUrl, (e) => e.id === second.id)).toEqual([]);
    expect((await atUrl()).map((r) => r.id)).toEqual([second.id]);
    // A replayed answer naming an endpoint deleted since is not taken: a new endpoint is made.
    await adapter.removeOtherWebhookEndpoints(creds, receiverUrl, () => false);
    const third = await adapter.createWebhookEndpoint(creds, receiverUrl, key);
    expect(third.id).not.toBe(second.id);
    expect(await t.sql('SELECT id FROM sandbox_cardpay_webhook_endpoints WHERE id = $1', [third.id])).toEqual([{ id: third.id }]);
  });

  it("the credentials preparer registers our callback URL, naming the merchant, when no webhook_secret is given", async () => {
    const prepare = prepareCardpayCredentials(adapter, t.service.container.config);
    const creds = newCreds();
    const merchantId = randomUUID();
    const { credentials: prepared } = await prepare(merchantId, creds);
    expect(prepared.secret_key).toBe(creds.secret_key);
    expect(prepared.webhook_secret).toMatch(/^whsec_/);
    const rows = await t.sql<{ url: string; secret: string; enabled_events: string[] }>('SELECT url, secret, enabled_events FROM sandbox_cardpay_webhook_endpoints WHERE secret = $1', [prepared.webhook_secret]);
    expect(rows).toEqual([{ url: `${t.baseUrl}/v1/webhooks/cardpay?merchant=${merchantId}`, secret: prepared.webhook_secret, enabled_events: ['payment_intent.succeeded', 'payment_intent.payment_failed', 'payment_intent.canceled', 'charge.refunded', 'charge.refund.updated', 'refund.created', 'refund.updated', 'refund.failed'] }]);
    const given = { ...newCreds(), webhook_secret: 'whsec_given' };
    // With the account the key acts on (read at every store of a new key: ProviderGateway.otherAccount).
    expect(await prepare(randomUUID(), given)).toEqual({ credentials: { ...given, provider_account: expect.stringMatching(/^acct_/) } });
  });
});

describe('outages', () => {
  const setMode = (mode: string) => t.http.post('/sandbox/cardpay/_control/outage').send({ mode }).expect(200);

  it("'error' mode: creation is indeterminate, a read is unavailable", async () => {
    const creds = newCreds();
    await setMode('error');
    try {
      const created = await providerError(adapter.createPayment(creds, paymentInput({ payment_method: 'pm_card_visa' })));
      expect(created.kind).toBe('indeterminate');
      expect(created.message).toContain('HTTP 500');
      const read = await providerError(adapter.getPayment(creds, { paymentId: randomUUID(), providerRef: 'pi_x', reference: 'R', providerData: {} }));
      expect(read.kind).toBe('unavailable');
    } finally {
      await setMode('ok');
    }
  });

  it("'hang' mode: the call gives up after the provider timeout, indeterminate", async () => {
    await setMode('hang');
    try {
      const err = await providerError(adapter.createPayment(newCreds(), paymentInput({ payment_method: 'pm_card_visa' })));
      expect(err.kind).toBe('indeterminate');
      expect(err.message).toContain('did not answer in time');
    } finally {
      await setMode('ok');
    }
    // And the simulator answers again.
    expect((await adapter.createPayment(newCreds(), paymentInput({ payment_method: 'pm_card_visa' }))).status).toBe('completed');
  });
});

describe('connections to the provider', () => {
  /** An adapter whose cardpay address is `baseUrl` (a plain server standing in for the provider's network). */
  const adapterAt = (baseUrl: string) =>
    new CardpayAdapter({ ...t.service.container.config, providerBaseUrls: { ...t.service.container.config.providerBaseUrls, cardpay: baseUrl } });
  const lookup = () => ({ paymentId: randomUUID(), providerRef: 'pi_idle', reference: 'R', providerData: {} });

  it("an idle connection is closed by us before the provider's announced keep-alive timeout, so no call takes one the provider is closing", async () => {
    const intent = { id: 'pi_idle', object: 'payment_intent', status: 'succeeded', amount: 1050, currency: 'usd', metadata: {}, last_payment_error: null, next_action: null };
    const server = http.createServer((_req, res) => {
      res.setHeader('content-type', 'application/json');
      res.end(JSON.stringify(intent));
    });
    server.keepAliveTimeout = 2_000; // announced as `Keep-Alive: timeout=2`
    const closes: Array<{ byClient: boolean }> = [];
    server.on('connection', (socket) => {
      let byClient = false;
      socket.on('end', () => (byClient = true)); // a FIN from the client: it closed first
      socket.on('close', () => closes.push({ byClient }));
    });
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
    try {
      const result = await adapterAt(`http://127.0.0.1:${(server.address() as AddressInfo).port}`).getPayment(newCreds(), lookup());
      expect(result.providerRef).toBe('pi_idle');
      const [closed] = await eventually(() => (closes.length ? closes : undefined), 'the idle connection to close');
      expect(closed).toEqual({ byClient: true });
    } finally {
      await new Promise<void>((resolve) => server.close(() => resolve()));
    }
  });

  it('a provider that refuses the connection is reported as not reached, not as a timeout; a write too (nothing was sent)', async () => {
    const server = http.createServer();
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
    const port = (server.address() as AddressInfo).port;
    await new Promise<void>((resolve) => server.close(() => resolve()));
    const refused = adapterAt(`http://127.0.0.1:${port}`);
    const read = await providerError(refused.getPayment(newCreds(), lookup()));
    expect(read).toMatchObject({ kind: 'unavailable', message: 'cardpay could not be reached (ECONNREFUSED)' });
    const write = await providerError(refused.createPayment(newCreds(), paymentInput({ payment_method: 'pm_card_visa' })));
    expect(write).toMatchObject({ kind: 'unavailable', message: 'cardpay could not be reached (ECONNREFUSED)' });
  });
});

describe('answers about something else than was asked', () => {
  /**
   * In front of the simulator: while `swap` is set, a read of one intent is answered with another's, a
   * search for one payment's intent with the search for another payment's, a read of one refund with
   * another's, and a refund of one intent (`refundCreate`: [intent, refund]) with that refund, read
   * (a cache or proxy mixing answers up).
   */
  class MixedUpAnswers extends ForwardingStub {
    swap: { intent?: [string, string]; payment?: [string, string]; refund?: [string, string]; refundCreate?: [string, string] } = {};

    protected override async intercept(req: StubRequest, forward: Forward): Promise<StubAnswer> {
      const [refundedIntent, answeredRefund] = this.swap.refundCreate ?? [];
      if (req.method === 'POST' && refundedIntent && req.url === '/v1/refunds' && new URLSearchParams(req.body.toString()).get('payment_intent') === refundedIntent) {
        const read = await fetch(`${this.target}/v1/refunds/${answeredRefund}`, { headers: { authorization: String(req.headers.authorization) } });
        return { status: read.status, headers: { 'Content-Type': 'application/json' }, body: await read.text() };
      }
      const [askedRefund, otherRefund] = this.swap.refund ?? [];
      if (req.method === 'GET' && askedRefund && req.url.startsWith(`/v1/refunds/${askedRefund}`)) return forward(`${this.target}/v1/refunds/${otherRefund}`);
      const [asked, other] = this.swap.intent ?? [];
      if (req.method === 'GET' && asked && req.url.startsWith(`/v1/payment_intents/${asked}`)) return forward(`${this.target}/v1/payment_intents/${other}`);
      const [payment, otherPayment] = this.swap.payment ?? [];
      if (req.method === 'GET' && payment && req.url.startsWith('/v1/payment_intents/search') && decodeURIComponent(req.url).includes(payment)) {
        return forward(`${this.target}${decodeURIComponent(req.url).replace(payment, otherPayment!).replace(/'/g, '%27').replace(/\[/g, '%5B').replace(/\]/g, '%5D')}`);
      }
      return forward();
    }
  }
  let stub: MixedUpAnswers;
  let viaStub: CardpayAdapter;
  beforeAll(async () => {
    stub = new MixedUpAnswers();
    stub.target = `${t.baseUrl}/sandbox/cardpay`;
    const url = await stub.start();
    viaStub = new CardpayAdapter({ ...t.service.container.config, providerBaseUrls: { ...t.service.container.config.providerBaseUrls, cardpay: url } });
  });
  afterAll(async () => stub.stop());

  /** A payment pending 3-D Secure, and another one that succeeded, on one account. */
  async function pendingAndPaid() {
    const creds = newCreds();
    const pendingInput = paymentInput({ payment_method: 'pm_card_threeDSecureRequired' });
    const pending = await adapter.createPayment(creds, pendingInput);
    expect(pending.status).toBe('pending');
    const paidInput = paymentInput({ payment_method: 'pm_card_visa' });
    const paid = await adapter.createPayment(creds, paidInput);
    expect(paid.status).toBe('completed');
    const lookupOf = (input: CreatePaymentInput, providerRef: string | null) => ({ paymentId: input.paymentId, providerRef, reference: input.reference, providerData: {} });
    return { creds, pending, pendingLookup: lookupOf(pendingInput, pending.providerRef), pendingLookupWithoutRef: lookupOf(pendingInput, null), paid, paidInput };
  }

  it("a read of our intent answered with another intent is not taken as ours (the pending payment is not reported completed)", async () => {
    const { creds, pending, pendingLookup, paid } = await pendingAndPaid();
    stub.swap = {};
    expect(await viaStub.getPayment(creds, pendingLookup)).toMatchObject({ providerRef: pending.providerRef, status: 'pending' });
    stub.swap = { intent: [pending.providerRef, paid.providerRef] };
    try {
      const err = await providerError(viaStub.getPayment(creds, pendingLookup));
      expect(err).toMatchObject({ kind: 'unavailable' });
      expect(err.message).toContain(paid.providerRef);
    } finally {
      stub.swap = {};
    }
  });

  it("a read of our refund answered with another refund is not taken as ours (the pending refund is not reported completed)", async () => {
    const creds = newCreds();
    const slowInput = paymentInput({ payment_method: 'pm_card_pendingRefund' }, 1000n);
    const slow = await adapter.createPayment(creds, slowInput);
    const pendingRefund = await adapter.refundPayment(creds, refundInput(slow, slowInput, 300n));
    expect(pendingRefund.status).toBe('pending');
    const paidInput = paymentInput({ payment_method: 'pm_card_visa' }, 1000n);
    const paid = await adapter.createPayment(creds, paidInput);
    const doneRefund = await adapter.refundPayment(creds, refundInput(paid, paidInput, 300n));
    expect(doneRefund.status).toBe('completed');
    const lookup = {
      refundId: randomUUID(), providerRef: pendingRefund.providerRef,
      payment: { paymentId: slowInput.paymentId, providerRef: slow.providerRef, reference: slowInput.reference, providerData: {} },
    };
    stub.swap = {};
    expect(await viaStub.findRefund(creds, lookup)).toMatchObject({ providerRef: pendingRefund.providerRef, status: 'pending' });
    stub.swap = { refund: [pendingRefund.providerRef!, doneRefund.providerRef!] };
    try {
      const err = await providerError(viaStub.findRefund(creds, lookup));
      expect(err).toMatchObject({ kind: 'unavailable' });
      expect(err.message).toContain(doneRefund.providerRef!);
    } finally {
      stub.swap = {};
    }
  });

  it("a refund answered with another refund (another intent's, or another of ours) is not applied: its outcome is unknown (indeterminate)", async () => {
    const creds = newCreds();
    const oursInput = paymentInput({ payment_method: 'pm_card_visa' }, 1000n);
    const ours = await adapter.createPayment(creds, oursInput);
    const otherInput = paymentInput({ payment_method: 'pm_card_visa' }, 1000n);
    const other = await adapter.createPayment(creds, otherInput);
    const request = refundInput(ours, oursInput, 300n);
    // Another intent's refund of the same amount and currency; one naming our refund id too (our request
    // carried on for another intent); and an earlier refund of our own intent, of the same amount.
    const otherIntents = await adapter.refundPayment(creds, refundInput(other, otherInput, 300n));
    const otherIntentsNamingOurs = await adapter.refundPayment(creds, { ...refundInput(other, otherInput, 300n), refundId: request.refundId });
    const earlierOfOurs = await adapter.refundPayment(creds, refundInput(ours, oursInput, 300n));
    for (const answer of [otherIntents, otherIntentsNamingOurs, earlierOfOurs]) {
      expect(answer.status).toBe('completed');
      stub.swap = { refundCreate: [ours.providerRef, answer.providerRef!] };
      try {
        const err = await providerError(viaStub.refundPayment(creds, request));
        // Was: completed, with the other refund's re_… (our payment's amount_refunded raised, payment.refunded sent).
        expect(err).toMatchObject({ kind: 'indeterminate', message: expect.stringContaining(answer.providerRef!) });
      } finally {
        stub.swap = {};
      }
    }
    const made = await viaStub.refundPayment(creds, request);
    expect(made).toMatchObject({ status: 'completed', amount: { minor: 300n, currency: 'USD' } });
    expect([otherIntents, otherIntentsNamingOurs, earlierOfOurs].map((r) => r.providerRef)).not.toContain(made.providerRef);
  });

  it("a search for our payment's intent answered with another payment's intent is not taken as ours, nor as none", async () => {
    const { creds, pending, pendingLookupWithoutRef, paidInput } = await pendingAndPaid();
    stub.swap = {};
    expect(await viaStub.findPayment(creds, pendingLookupWithoutRef)).toMatchObject({ providerRef: pending.providerRef, status: 'pending' });
    stub.swap = { payment: [pendingLookupWithoutRef.paymentId, paidInput.paymentId] };
    try {
      const err = await providerError(viaStub.findPayment(creds, pendingLookupWithoutRef));
      expect(err).toMatchObject({ kind: 'unavailable' });
      expect(err.message).toContain(paidInput.paymentId);
      // getPayment without a reference searches too: the same refusal.
      expect(await providerError(viaStub.getPayment(creds, pendingLookupWithoutRef))).toMatchObject({ kind: 'unavailable' });
    } finally {
      stub.swap = {};
    }
  });
});

describe('a key of the same account without the webhook-endpoint permission', () => {
  /** In front of the simulator: the `restricted` key may not list or delete webhook endpoints, as a restricted key without that permission. */
  class RestrictedKey extends ForwardingStub {
    restricted = '';
    protected override intercept(req: StubRequest, forward: Forward): Promise<StubAnswer> {
      if (this.restricted && req.url.startsWith('/v1/webhook_endpoints') && req.headers.authorization === `Bearer ${this.restricted}`) {
        const message = `The provided key '${this.restricted.slice(0, 8)}****${this.restricted.slice(-4)}' does not have the required permissions for this endpoint. Having the 'rak_webhook_write' permission would allow this request to continue.`;
        return Promise.resolve({ status: 403, headers: { 'Content-Type': 'application/json' }, body: JSON.stringify({ error: { type: 'invalid_request_error', message } }) });
      }
      return forward();
    }
  }

  it('the endpoint the replaced key had registered is deleted through the replaced key when the new one may not', async () => {
    const stub = new RestrictedKey();
    stub.target = `${t.baseUrl}/sandbox/cardpay`;
    const viaStub = new CardpayAdapter({ ...t.service.container.config, providerBaseUrls: { ...t.service.container.config.providerBaseUrls, cardpay: await stub.start() } });
    try {
      const prepare = prepareCardpayCredentials(viaStub, t.service.container.config);
      const merchantId = randomUUID();
      const full = `rk_test_${randomUUID().replace(/-/g, '')}`;
      const { credentials: first } = await prepare(merchantId, { secret_key: full });
      const registered = await t.sql<{ id: string }>('SELECT id FROM sandbox_cardpay_webhook_endpoints WHERE secret = $1', [first.webhook_secret]);
      expect(registered).toHaveLength(1);
      // A key of the same account (rolled from the first, which stays valid an hour) that may not touch endpoints.
      const rolled = await t.http.post('/sandbox/cardpay/_control/roll-key').set('Authorization', `Bearer ${full}`).send({ expires_in_seconds: 3600 }).expect(200);
      stub.restricted = rolled.body.secret_key as string;
      const { credentials: second, afterStored } = await prepare(merchantId, { secret_key: stub.restricted, webhook_secret: 'whsec_merchants_own' }, first);
      expect((second as Record<string, unknown>).provider_account).toBe((first as Record<string, unknown>).provider_account);
      await afterStored!();
      expect(await t.sql('SELECT id FROM sandbox_cardpay_webhook_endpoints WHERE id = $1', [registered[0]!.id])).toEqual([]);
    } finally {
      await stub.stop();
    }
  });
});
