import type { WalletpayCredentials } from '../../../contract/index.js';
import type { AppConfig } from '../../config/config.js';
import { providerBaseUrl, providerNamedBaseUrl } from '../base-url.js';
import { WalletpaySigningCertificates, verifyOffline, type OfflineVerdict, type Transmission } from './signing-certificates.js';
import { httpRequest, type HttpResponse } from '../http-client.js';
import type { CreatePaymentInput, PaymentLookup, ProviderPaymentResult, ProviderRefundResult, RefundInput, RefundLookup } from '../../domain/ports.js';
import { ProviderError, answerAboutSomethingElse } from '../../domain/ports.js';
import { WalletpayTokens } from './oauth.js';
import {
  SUBSCRIBED_EVENTS,
  captureIdOfRefund,
  createOrderRequest,
  errorCode,
  errorFromResponse,
  latestCapture,
  orderToResult,
  payeeOf,
  storedPayee,
  refundRequest,
  refundToResult,
  requestId,
  type WireCapture,
  type WireOrder,
  type WirePayee,
  type WireRefund,
  type WireWebhook,
} from './transformers.js';

export interface WalletpayCaptureInput {
  orderId: string;
  idempotencyKey: string;
  /** The payee the create answer named (provider_data.payee), compared with the answer's. */
  payee?: WirePayee | null;
}

/** The fields of PayPal's verify-webhook-signature postback. */
export interface WalletpaySignatureCheck {
  authAlgo: string;
  certUrl: string;
  transmissionId: string;
  transmissionSig: string;
  transmissionTime: string;
  webhookId: string;
  webhookEvent: unknown;
}

interface CallOptions {
  body?: unknown;
  headers?: Record<string, string>;
  /** Whether the call changes something at the provider (a 5xx or timeout is then indeterminate). */
  mutating: boolean;
  /** Statuses that are answers rather than errors. */
  ok?: number[];
}

/**
 * walletpay over PayPal's REST wire protocol: Orders v2 (create, get, capture), Payments v2 (refund a
 * capture) and Webhooks v1 (register, verify-webhook-signature). Stateless apart from the access-token
 * cache; the base URL is resolved per call (override, built-in simulator, or the real provider for
 * the credential's env).
 */
export class WalletpayAdapter {
  readonly provider = 'walletpay' as const;
  private readonly tokens: WalletpayTokens;
  private readonly certificates: WalletpaySigningCertificates;

  constructor(private readonly config: AppConfig) {
    this.tokens = new WalletpayTokens(() => this.config.providerTimeoutMs);
    this.certificates = new WalletpaySigningCertificates(config.providerTimeoutMs);
  }

  /** The offline check of an inbound event (certificate from the provider's own host, cached); see signing-certificates.ts. */
  verifyTransmissionOffline(creds: WalletpayCredentials, transmission: Transmission): Promise<OfflineVerdict> {
    // Checked against where the provider names its certificates (the simulator: under PUBLIC_BASE_URL).
    return verifyOffline(transmission, providerNamedBaseUrl(this.config, 'walletpay', creds.env), this.certificates, creds.env);
  }

  baseUrl(creds: WalletpayCredentials): string {
    return providerBaseUrl(this.config, 'walletpay', creds.env);
  }

  /**
   * Creates the order; the buyer then approves at `nextAction.url` and the merchant captures. An answer
   * whose order names another payment (custom_id) is not taken as ours: the outcome is unknown
   * (indeterminate), and the status sync sends the creation again with the same PayPal-Request-Id.
   */
  async createPayment(creds: WalletpayCredentials, input: CreatePaymentInput): Promise<ProviderPaymentResult> {
    const { body } = await this.call<WireOrder>(creds, 'POST', '/v2/checkout/orders', {
      body: createOrderRequest(input),
      headers: { 'PayPal-Request-Id': requestId(input.idempotencyKey), Prefer: 'return=representation' },
      mutating: true,
    });
    const order = expectOrder(body);
    const other = paymentNamed(order, input.paymentId);
    if (other) throw answerAboutSomethingElse('walletpay', 'indeterminate', `the order created for payment ${input.paymentId} (${order.id}) names ${other}`);
    const result = orderToResult(order);
    // The payee it names is kept (provider_data.payee): every later read of the order is compared with it.
    const payee = payeeOf(order);
    return payee ? { ...result, data: { ...result.data, payee } } : result;
  }

  /**
   * Status sync: the order as it stands (with its capture id once captured); an answer about another order
   * is none (getOrder). Compared with the payee its create answer named (orderIntegrityIssue).
   */
  async getPayment(creds: WalletpayCredentials, lookup: PaymentLookup): Promise<ProviderPaymentResult> {
    return orderToResult(await this.getOrder(creds, orderIdOf(lookup), lookup.paymentId), storedPayee(lookup.providerData));
  }

  /**
   * Captures an approved order. The answer is judged by the capture's status, not the order's. An order
   * not approved yet, or captured already, is `invalid_request` with providerCode `ORDER_NOT_APPROVED`
   * or `ORDER_ALREADY_CAPTURED`; a retry with the same idempotency key replays the first capture.
   * An answer about another order is not applied: the capture may have been made, so its outcome is
   * unknown (indeterminate) and the status sync reads the order to learn it. So is a 2xx answer without
   * its captures whose follow-up read of the order fails, however it fails (a 429 or 403 included): PayPal
   * said it captured, so the failure is never "refused before acting" — only the result is unknown.
   */
  async capturePayment(creds: WalletpayCredentials, input: WalletpayCaptureInput): Promise<ProviderPaymentResult> {
    const { body } = await this.call<WireOrder>(creds, 'POST', `/v2/checkout/orders/${encodeURIComponent(input.orderId)}/capture`, {
      body: {},
      headers: { 'PayPal-Request-Id': requestId(input.idempotencyKey), Prefer: 'return=representation' },
      mutating: true,
    });
    const order = expectOrder(body);
    if (order.id !== input.orderId) throw answerAboutSomethingElse('walletpay', 'indeterminate', `the capture of order ${input.orderId} answered order ${order.id}`);
    if (latestCapture(order)) return orderToResult(order, input.payee);
    // A minimal answer has no captures array: read the order to see the capture itself.
    try {
      return orderToResult(await this.getOrder(creds, input.orderId), input.payee);
    } catch (err) {
      if (!(err instanceof ProviderError)) throw err;
      // No provider code kept: the read's refusal is not the capture's (the provider port reads capture refusals by code).
      throw new ProviderError('walletpay', 'indeterminate', `walletpay answered the capture of order ${input.orderId} (HTTP 2xx) without it, and the order could not be read to see it: ${err.message}`);
    }
  }

  /**
   * Refunds (part of) the payment's capture; the amount is always explicit. An answer naming another
   * refund of ours (custom_id), another capture (its `up` link) or none is not applied: the refund may
   * have been made, so its outcome is unknown (indeterminate) and the refund sync asks again. PayPal's
   * refund always carries its HATEOAS links (a `return=minimal` answer too: id, status, links), the `up`
   * one naming the capture refunded, so an answer without it proves nothing about ours. custom_id is
   * optional in PayPal's refund schema (a minimal answer leaves it out): checked only when present.
   */
  async refundPayment(creds: WalletpayCredentials, input: RefundInput): Promise<ProviderRefundResult> {
    const known = input.payment.providerData.captureId;
    let captureId = typeof known === 'string' && known ? known : null;
    if (!captureId) captureId = latestCapture(await this.getOrder(creds, orderIdOf(input.payment), input.payment.paymentId))?.id ?? null;
    if (!captureId) throw new ProviderError('walletpay', 'invalid_request', 'walletpay payment has no capture to refund', 'NO_CAPTURE');
    const { body } = await this.call<WireRefund>(creds, 'POST', `/v2/payments/captures/${encodeURIComponent(captureId)}/refund`, {
      body: refundRequest(input),
      headers: { 'PayPal-Request-Id': requestId(input.idempotencyKey), Prefer: 'return=representation' },
      mutating: true,
    });
    if (!body || typeof body.id !== 'string') throw unexpected('refund');
    if (body.custom_id && body.custom_id !== input.refundId) {
      throw answerAboutSomethingElse('walletpay', 'indeterminate', `the refund ${input.refundId} of capture ${captureId} answered refund ${body.id}, which is refund ${body.custom_id}`);
    }
    const refunded = captureIdOfRefund(body);
    if (refunded !== captureId) {
      throw answerAboutSomethingElse('walletpay', 'indeterminate', `the refund of capture ${captureId} answered refund ${body.id} of ${refunded ? `capture ${refunded}` : 'no capture'}`);
    }
    return refundToResult(body);
  }

  /**
   * Refund sync: the refund by id; without one (the request's answer was lost), the refund on the
   * payment's order whose custom_id is ours, if any (an order lists its captures' refunds). An answer
   * about another refund (or order) is none about ours: unavailable, never applied.
   */
  async findRefund(creds: WalletpayCredentials, lookup: RefundLookup): Promise<ProviderRefundResult | null> {
    if (lookup.providerRef) {
      const { body } = await this.call<WireRefund>(creds, 'GET', `/v2/payments/refunds/${encodeURIComponent(lookup.providerRef)}`, { mutating: false });
      if (!body || typeof body.id !== 'string') throw unexpected('refund');
      if (body.id !== lookup.providerRef) throw answerAboutSomethingElse('walletpay', 'unavailable', `the refund read as ${lookup.providerRef} is ${body.id}`);
      return refundToResult(body);
    }
    if (!lookup.payment.providerRef) return null;
    const order = await this.getOrder(creds, lookup.payment.providerRef, lookup.payment.paymentId);
    const ours = order.purchase_units?.flatMap((u) => u.payments?.refunds ?? []).find((r) => r.custom_id === lookup.refundId);
    return ours ? refundToResult(ours) : null;
  }

  /**
   * A capture as PayPal shows it (`GET /v2/payments/captures/{id}`), with the order it belongs to in
   * `supplementary_data.related_ids.order_id`; null when PayPal knows no such capture (404
   * INVALID_RESOURCE_ID); 'not_visible' when these credentials may not read it (403 PERMISSION_DENIED, the
   * 403 PayPal documents for this call: another account's, or an app lacking the permission). Any other failure throws (another 403 too: the credentials' own
   * permissions); an answer about another capture too (unavailable: it says nothing of whose this one is).
   */
  async getCapture(creds: WalletpayCredentials, captureId: string): Promise<WireCapture | null | 'not_visible'> {
    const res = await this.call<WireCapture>(creds, 'GET', `/v2/payments/captures/${encodeURIComponent(captureId)}`, { mutating: false, ok: [200, 403, 404] });
    if (res.status === 404 || res.status === 403) {
      // Only PayPal's own "no such resource" or "not permitted" is an answer: a 404 of another kind (a wrong
      // base URL) or a 403 of another kind is not. PayPal's 403 PERMISSION_DENIED says another account's
      // capture, or credentials lacking the permission — it does not say which (not_visible).
      if (errorCode(res.body) === (res.status === 404 ? 'INVALID_RESOURCE_ID' : 'PERMISSION_DENIED')) return res.status === 404 ? null : 'not_visible';
      throw errorFromResponse(res.status, res.body, { mutating: false });
    }
    if (!res.body || typeof res.body.id !== 'string') throw unexpected('capture');
    if (res.body.id !== captureId) throw answerAboutSomethingElse('walletpay', 'unavailable', `the capture read as ${captureId} is ${res.body.id}`);
    return res.body;
  }

  /**
   * Subscribes `url` to the events the service acts on and returns the webhook id. PayPal refuses a
   * second webhook with the same URL; then the existing one is looked up, and when it lacks an event the
   * service acts on (made by hand, or by an older version of the service) its event types are replaced
   * with what it had plus ours (`PATCH /v1/notifications/webhooks/{id}`, JSON Patch `replace
   * /event_types`), so no event the service needs is silently never sent.
   */
  async registerWebhook(creds: WalletpayCredentials, url: string): Promise<{ webhookId: string }> {
    const res = await this.call<WireWebhook>(creds, 'POST', '/v1/notifications/webhooks', {
      body: { url, event_types: SUBSCRIBED_EVENTS.map((name) => ({ name })) },
      mutating: true,
      ok: [200, 201, 400],
    });
    if (res.status !== 400) {
      if (!res.body || typeof res.body.id !== 'string') throw unexpected('webhook');
      return { webhookId: res.body.id };
    }
    if (errorCode(res.body) !== 'WEBHOOK_URL_ALREADY_EXISTS') throw errorFromResponse(res.status, res.body, { mutating: false });
    const { body } = await this.call<{ webhooks?: WireWebhook[] }>(creds, 'GET', '/v1/notifications/webhooks', { mutating: false });
    const existing = body?.webhooks?.find((w) => w.url === url);
    if (!existing) throw new ProviderError('walletpay', 'invalid_request', 'walletpay reported the webhook URL as registered but did not list it', 'WEBHOOK_URL_ALREADY_EXISTS');
    const names = (existing.event_types ?? []).map((t) => t.name);
    const missing = names.includes('*') ? [] : SUBSCRIBED_EVENTS.filter((name) => !names.includes(name));
    if (missing.length > 0) {
      await this.call<WireWebhook>(creds, 'PATCH', `/v1/notifications/webhooks/${encodeURIComponent(existing.id)}`, {
        body: [{ op: 'replace', path: '/event_types', value: [...names, ...missing].map((name) => ({ name })) }],
        mutating: true,
      });
    }
    return { webhookId: existing.id };
  }

  /** PayPal's postback check of an inbound event's signature, with the merchant's credentials. */
  async verifyWebhookSignature(creds: WalletpayCredentials, check: WalletpaySignatureCheck): Promise<boolean> {
    const { body } = await this.call<{ verification_status?: string }>(creds, 'POST', '/v1/notifications/verify-webhook-signature', {
      body: {
        auth_algo: check.authAlgo,
        cert_url: check.certUrl,
        transmission_id: check.transmissionId,
        transmission_sig: check.transmissionSig,
        transmission_time: check.transmissionTime,
        webhook_id: check.webhookId,
        webhook_event: check.webhookEvent,
      },
      mutating: false,
    });
    return body?.verification_status === 'SUCCESS';
  }

  /**
   * The order `orderId`, of our payment `paymentId` when one is given. An answer about another order, or
   * one naming another payment in custom_id, is refused 'unavailable' (answerAboutSomethingElse): nothing is concluded
   * from it, and the caller asks again later.
   */
  private async getOrder(creds: WalletpayCredentials, orderId: string, paymentId?: string): Promise<WireOrder> {
    const { body } = await this.call<WireOrder>(creds, 'GET', `/v2/checkout/orders/${encodeURIComponent(orderId)}`, { mutating: false });
    const order = expectOrder(body);
    if (order.id !== orderId) throw answerAboutSomethingElse('walletpay', 'unavailable', `the order read as ${orderId} is ${order.id}`);
    const other = paymentId ? paymentNamed(order, paymentId) : null;
    if (other) throw answerAboutSomethingElse('walletpay', 'unavailable', `the order read as ${orderId} (of payment ${paymentId}) names ${other}`);
    return order;
  }

  /**
   * One authenticated JSON call. A 401 means the cached token is no longer good (expired or revoked):
   * the token is fetched again and the call repeated once (a 401 means nothing was done).
   */
  private async call<T>(creds: WalletpayCredentials, method: string, path: string, options: CallOptions): Promise<{ status: number; body: T | null }> {
    const baseUrl = this.baseUrl(creds);
    let res: HttpResponse | null = null;
    for (let attempt = 0; attempt < 2; attempt++) {
      const token = await this.tokens.token(baseUrl, creds);
      res = await httpRequest('walletpay', `${baseUrl}${path}`, {
        method,
        headers: {
          Authorization: `Bearer ${token}`,
          Accept: 'application/json',
          ...(options.body !== undefined ? { 'Content-Type': 'application/json' } : {}),
          ...options.headers,
        },
        body: options.body !== undefined ? JSON.stringify(options.body) : undefined,
        timeoutMs: this.config.providerTimeoutMs,
      });
      if (res.status !== 401) break;
      await this.tokens.invalidate(baseUrl, creds, token);
    }
    const { status, json } = res!;
    const ok = options.ok ?? [200, 201];
    if (!ok.includes(status)) throw errorFromResponse(status, json, { mutating: options.mutating });
    return { status, body: json as T | null };
  }
}

function orderIdOf(lookup: PaymentLookup): string {
  if (!lookup.providerRef) throw new ProviderError('walletpay', 'invalid_request', 'walletpay payment has no order id yet', 'NO_ORDER');
  return lookup.providerRef;
}

function expectOrder(body: WireOrder | null): WireOrder {
  if (!body || typeof body.id !== 'string' || typeof body.status !== 'string') throw unexpected('order');
  return body;
}

/**
 * What an order names other than payment `paymentId` ("payment X"), or null when it names none other.
 * We send our payment id as purchase_units[0].custom_id, and PayPal repeats it on the unit and its
 * captures; one without it names nothing.
 */
function paymentNamed(order: WireOrder, paymentId: string): string | null {
  for (const unit of order.purchase_units ?? []) {
    for (const named of [unit.custom_id, ...(unit.payments?.captures ?? []).map((c) => c.custom_id)]) {
      if (named && named !== paymentId) return `payment ${named}`;
    }
  }
  return null;
}

/** A 2xx that is not the resource we asked for: we cannot tell what happened. */
const unexpected = (what: string) => new ProviderError('walletpay', 'indeterminate', `walletpay answered without a ${what}`);
