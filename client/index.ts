/**
 * The Payments API SDK. Every type comes from the contract the server is built from; nothing here
 * depends on server code. Methods return the response's `data` (lists: `{ data, meta }`) and throw
 * PaymentsApiError for any other answer (non-2xx, a redirect, a 2xx without the service's envelope),
 * PaymentsConnectionError when no answer arrived.
 */
import { randomUUID } from 'node:crypto';
import { initClient, type AppRoute, type ClientInferRequest, type SuccessfulHttpStatusCode } from '@ts-rest/core';
import type { z } from 'zod';
import {
  contract,
  type CapturedPaymentSchema,
  type CredentialSummarySchema,
  type DeliveryLogDetailSchema,
  type DeliveryLogSchema,
  type MerchantSchema,
  type PaymentSchema,
  type PaymentTransitionSchema,
  type RecoverResultSchema,
  type TestDeliveryResultSchema,
  type Provider,
  type RefundSchema,
  type SavedCardSchema,
} from '../contract/index.js';
import { parseErrorEnvelope, PaymentsApiError } from './errors.js';
import { paginate, type Page } from './pagination.js';
import type { WebhookEvent } from './webhooks.js';
import {
  checkDelayMs,
  checkMaxRetries,
  checkTimeoutMs,
  createFetcher,
  isSuccessEnvelope,
  withoutUrlCredentials,
  type FetcherResult,
  type RequestOptions,
  type RetryInfo,
} from './transport.js';

export interface PaymentsClientOptions {
  /** The service's address, e.g. `http://localhost:3000` (an http(s) URL without user:password@, else createPaymentsClient throws a TypeError). */
  baseUrl: string;
  /** A merchant API key (`pk_…`), sent as X-API-Key. */
  apiKey: string;
  /** A fetch implementation (default: the global fetch). */
  fetch?: typeof globalThis.fetch;
  /**
   * Per-attempt timeout in milliseconds (default 30 000): an integer from 1 to 2^31-1, else a TypeError. Calls that
   * wait on something else within the request wait at least longer: webhooks.sendTest and webhookLogs.retry 45 s,
   * payments.create, payments.capture, refunds.create and cards.create 4 minutes, the mobilemoney operations
   * 5 minutes (a call's own timeoutMs still wins).
   */
  timeoutMs?: number;
  /** Retries after the first attempt, for requests that are safe to repeat (default 2): a non-negative integer, else a TypeError. */
  maxRetries?: number;
  /** First backoff step in milliseconds (default 500); doubles per retry, with jitter. */
  initialRetryDelayMs?: number;
  /** Longest wait between attempts (default 30 000); a longer Retry-After ends the retries. */
  maxRetryDelayMs?: number;
  /** Called before each retry (logging, metrics). */
  onRetry?: (info: RetryInfo) => void;
}

export interface IdempotentRequestOptions extends RequestOptions {
  /**
   * Makes the call safe to repeat: the same key and body return the original result (`$response.replayed`).
   * Generated (a random UUID) when omitted and reused by the SDK's own retries; pass your own, stored with
   * your order, to make retries across processes or restarts safe too.
   *
   * A key must be unique across the whole service, not only your shop: a key another merchant already
   * used is refused with 409 CONFLICT. So not a bare order id (`'order-1042'`): a UUID
   * (createIdempotencyKey()), or your order id behind a prefix only your shop uses
   * (`'acme-7f3c9e:order-1042'`).
   *
   * How long a key replays: a payment creation's for as long as the payment exists; a refund's, capture's or
   * card save's only within IDEMPOTENCY_KEY_RETENTION (24 h by default) of its first answer (a replay does not extend it) — after that the
   * key is unknown and a retry is a new request (a refund refunds again, a card save saves a second card).
   */
  idempotencyKey?: string;
}

/** Payment creation's options (an IdempotentRequestOptions). */
export type CreatePaymentOptions = IdempotentRequestOptions;

/**
 * The call's options with the Idempotency-Key it sends (the caller's, or a new random one), and what its
 * result's `$response` must say about that key (`meta`): a key the SDK generated is sent by this call alone,
 * so an answer replaying it replays this call's own earlier attempt, whose answer was lost — work this call
 * did, not `replayed`.
 */
function idempotent(opts: IdempotentRequestOptions | undefined): { options: RequestOptions & { idempotencyKey: string }; meta: Partial<ResponseMeta> } {
  const { idempotencyKey, ...requestOptions } = opts ?? {};
  if (idempotencyKey !== undefined) return { options: { ...requestOptions, idempotencyKey }, meta: {} };
  return { options: { ...requestOptions, idempotencyKey: createIdempotencyKey() }, meta: { replayed: false } };
}

type Contract = typeof contract;
type Success<T> = Extract<T, { status: SuccessfulHttpStatusCode }>;
type BodyOf<R extends AppRoute> = ClientInferRequest<R> extends { body: infer B } ? B : never;
type QueryOf<R extends AppRoute> = ClientInferRequest<R> extends { query: infer Q } ? Q : never;
/** Query parameters as the SDK takes them: page numbers as numbers, instants as Date or ISO strings. */
type SdkQuery<Q> = {
  [K in keyof Q]: K extends 'page' | 'page_size' ? number | undefined : K extends 'since' | 'until' ? Q[K] | Date : Q[K];
};

export type Payment = z.infer<typeof PaymentSchema>;
export type CapturedPayment = z.infer<typeof CapturedPaymentSchema>;
export type SavedCard = z.infer<typeof SavedCardSchema>;
export type Refund = z.infer<typeof RefundSchema>;
export type Merchant = z.infer<typeof MerchantSchema>;
export type CredentialSummary = z.infer<typeof CredentialSummarySchema>;
export type WebhookDelivery = z.infer<typeof DeliveryLogSchema>;
export type WebhookDeliveryDetail = z.infer<typeof DeliveryLogDetailSchema>;
export type PaymentTransition = z.infer<typeof PaymentTransitionSchema>;
/** An event as the events API returns it: exactly a webhook's body, so one handler narrowing on `type` serves both. */
export type Event = WebhookEvent;
export type RecoverResult = z.infer<typeof RecoverResultSchema>;
export type TestDeliveryResult = z.infer<typeof TestDeliveryResultSchema>;

export type CreatePaymentInput = BodyOf<Contract['payments']['create']>;
export type ListPaymentsQuery = SdkQuery<QueryOf<Contract['payments']['list']>>;
export type SaveCardInput = BodyOf<Contract['payments']['createCard']>;
export type ListCardsQuery = SdkQuery<QueryOf<Contract['payments']['listCards']>>;
export type CreateRefundInput = BodyOf<Contract['refunds']['create']>;
export type ListRefundsQuery = SdkQuery<QueryOf<Contract['refunds']['list']>>;
export type StoreCredentialsInput = BodyOf<Contract['merchant']['storeCredentials']>;
export type ListWebhookLogsQuery = SdkQuery<QueryOf<Contract['webhookLogs']['list']>>;
export type ListEventsQuery = SdkQuery<QueryOf<Contract['events']['list']>>;
/** `since` at most 7 days ago; `until` defaults to now. Dates or ISO strings. */
export interface RecoverInput {
  since: string | Date;
  until?: string | Date;
}
export type ReconcileInput = NonNullable<BodyOf<Contract['payments']['reconcile']>>;
export type RegisterPullInput = NonNullable<BodyOf<Contract['payments']['registerPull']>>;

/** An instant as the service takes it: a Date as its ISO string (an invalid Date is a TypeError), a string as it is. */
function iso(value: string | Date, name: string): string {
  if (!(value instanceof Date)) return value;
  if (Number.isNaN(value.getTime())) throw new TypeError(`${name} must be a valid Date or an ISO string, got an invalid Date`);
  return value.toISOString();
}

/** webhooks.recover's body; a TypeError for a missing window or an invalid Date (the method rejects with it, unsent). */
function recoverWindow(window: RecoverInput): { since: string; until?: string } {
  if (window === null || typeof window !== 'object') throw new TypeError(`webhooks.recover: the window must be { since, until? }, got ${window === null ? 'null' : typeof window}`);
  return { since: iso(window.since, 'since'), ...(window.until ? { until: iso(window.until, 'until') } : {}) };
}

/** A random Idempotency-Key (UUID v4). From node:crypto: Node 18 (engines >=18.18) has no global `crypto` without a flag. */
export function createIdempotencyKey(): string {
  return randomUUID();
}

/** About the HTTP answer a successful call returned. */
export interface ResponseMeta {
  status: number;
  /** X-Request-Id as the answer named it (else as the SDK sent it): quote it when asking for support. */
  requestId: string | null;
  /**
   * True when your Idempotency-Key replayed an earlier result (Idempotent-Replayed: true): no new work was done
   * for this answer. With your own key that result may be an earlier call's, or this call's own when
   * `earlierAttemptMayHaveSucceeded` is true too (an attempt whose answer was lost did the work, the SDK's retry
   * got it back): then it is this call's payment, refund, capture or card as far as the SDK can tell.
   * With a key the SDK generated (you passed none) it is always false: only this call ever sent that key,
   * so a replay of it is this call's own work.
   */
  replayed: boolean;
  /**
   * True when an earlier attempt of this call may have been carried out although its answer was lost (no
   * answer once connected, a timeout, a 5xx that can follow work, a 409 still running under this call's key),
   * so this answer may describe the state after that attempt: a replay of it, a DELETE's 404 (`alreadyDeleted`).
   * As on PaymentsApiError.
   */
  earlierAttemptMayHaveSucceeded: boolean;
  /**
   * `cards.delete` and `merchant.deleteCredentials` only: true when an attempt whose answer was lost
   * (network error once connected, timeout, a 5xx other than 501, 505 and the service's own 503) did the delete, so the SDK's retry found nothing left
   * (`status` is then that retry's 404) and the call resolved with the usual `{ …, deleted: true }`.
   */
  alreadyDeleted?: true;
  /** The Idempotency-Key the request carried (yours, or the one the SDK generated); absent when it carried none. */
  idempotencyKey?: string;
  headers: Headers;
}

/** A method's result with its response's metadata on `$response` (not enumerable: JSON and spreads leave it out). */
export type WithResponse<T> = T extends object ? T & { readonly $response: ResponseMeta } : T;

function attachResponse<T>(value: T, response: { status: number; headers: Headers }, extra: Partial<ResponseMeta> = {}): WithResponse<T> {
  if (value !== null && typeof value === 'object') {
    const { idempotencyKey, sentRequestId, earlierAttemptMayHaveSucceeded } = response as Partial<FetcherResult>;
    const meta: ResponseMeta = {
      status: response.status,
      requestId: response.headers.get('x-request-id') ?? sentRequestId ?? null,
      replayed: response.headers.get('idempotent-replayed') === 'true',
      earlierAttemptMayHaveSucceeded: earlierAttemptMayHaveSucceeded === true,
      ...(idempotencyKey ? { idempotencyKey } : {}),
      ...extra,
      headers: response.headers,
    };
    Object.defineProperty(value, '$response', { value: meta, enumerable: false, configurable: true });
  }
  return value as WithResponse<T>;
}

/** The `$response` of a value an SDK method returned (undefined for anything else). */
export function responseOf(value: unknown): ResponseMeta | undefined {
  return value !== null && typeof value === 'object' ? (value as { $response?: ResponseMeta }).$response : undefined;
}

/** The PaymentsApiError for a non-2xx answer, with what the transport's result knows: the Idempotency-Key, whether an attempt may have been carried out. */
function apiError(response: { status: number; body: unknown; headers: Headers }): PaymentsApiError {
  const call = response as Partial<FetcherResult>;
  return PaymentsApiError.fromResponse(response.status, response.body, response.headers, call.idempotencyKey, {
    earlierAttemptMayHaveSucceeded: call.earlierAttemptMayHaveSucceeded === true,
    mayHaveSucceeded: call.mayHaveSucceeded === true,
    ...(call.notRepeatable ? { notRepeatable: call.notRepeatable } : {}),
    ...(call.sentRequestId ? { sentRequestId: call.sentRequestId } : {}),
  });
}

/**
 * A 2xx in the service's `{ success: true, data }` envelope. Anything else throws a PaymentsApiError: the
 * error envelope's code, or UNEXPECTED_RESPONSE for an answer the service never gives — a 2xx without the
 * envelope (an SSO proxy's HTML page, a wrong baseUrl) or a redirect, which the SDK does not follow.
 */
function succeeded(response: { status: number; body: unknown; headers: Headers }): boolean {
  if (response.status >= 200 && response.status < 300 && isSuccessEnvelope(response.body)) return true;
  throw apiError(response);
}

/** The 2xx body (a list's `{ data, meta }`), or a PaymentsApiError (succeeded). */
async function ok<T extends { status: number; body: unknown; headers: Headers }>(pending: Promise<T>): Promise<WithResponse<Success<T>['body']>> {
  const response = await pending;
  succeeded(response);
  return attachResponse(response.body as Success<T>['body'], response);
}

type DataOf<B> = B extends { data: infer D } ? D : never;

/** The 2xx body's `data`, or a PaymentsApiError (succeeded); `meta` overrides what `$response` reads from the answer. */
async function data<T extends { status: number; body: unknown; headers: Headers }>(
  pending: Promise<T>,
  meta: Partial<ResponseMeta> = {},
): Promise<WithResponse<DataOf<Success<T>['body']>>> {
  const response = await pending;
  succeeded(response);
  return attachResponse((response.body as { data: DataOf<Success<T>['body']> }).data, response, meta);
}

/**
 * A DELETE's `data`. The SDK retries a DELETE whose answer was lost; when that earlier attempt did the
 * delete, the retry answers 404 NOT_FOUND. That 404 means the delete happened, so it resolves with the
 * route's success shape (`gone`) and `$response.alreadyDeleted`. A 404 with no such earlier attempt is
 * an unknown id and throws as always. (ts-rest hands the fetcher's result through as it is, so the
 * transport's flag arrives here.)
 */
async function deleted<T extends { status: number; body: unknown; headers: Headers }>(
  pending: Promise<T>,
  gone: DataOf<Success<T>['body']>,
): Promise<WithResponse<DataOf<Success<T>['body']>>> {
  const response = await pending;
  // The service's own NOT_FOUND (its envelope, read as every error is): not a proxy's 404 that looks like it.
  if (response.status === 404 && parseErrorEnvelope(response.body)?.code === 'NOT_FOUND' && (response as unknown as FetcherResult).earlierAttemptMayHaveSucceeded) {
    return attachResponse(gone, response, { alreadyDeleted: true });
  }
  return data(Promise.resolve(response));
}

/**
 * A path parameter as it goes into the URL. ts-rest inserts params unencoded and drops a `/:param`
 * whose value is empty, so a raw id could name another resource (`'../../merchant/credentials/cardpay'`)
 * or another route (`''` → the list). Every SDK method's path values go through here; those methods are
 * async so that a bad value rejects (before anything is sent) instead of throwing synchronously.
 */
function pathParam(value: unknown, name = 'id'): string {
  if (typeof value !== 'string') throw new TypeError(`${name} must be a string, got ${value === null ? 'null' : typeof value}`);
  if (value === '' || value === '.' || value === '..') throw new TypeError(`${name} must not be ${JSON.stringify(value)}`);
  return encodeURIComponent(value);
}

/** The raw query for ts-rest: numbers and Dates are serialised by its query encoder as they are. */
function query<Q>(value: SdkQuery<Q> | undefined): Q {
  return (value ?? {}) as unknown as Q;
}

/**
 * The service's address without trailing slashes; a TypeError unless it is an absolute http(s) URL without
 * credentials. fetch refuses a URL with user:password@ before connecting, with an error that carries the URL
 * and no code: every call failed after its retries as a lost answer (a create never sent as `mayHaveSucceeded`),
 * the password in the message. The service authenticates by apiKey; the message shows the URL without them.
 */
function checkBaseUrl(value: unknown): string {
  let url: URL | undefined;
  try {
    url = typeof value === 'string' ? new URL(value) : undefined;
  } catch {
    url = undefined;
  }
  const shown = JSON.stringify(typeof value === 'string' ? withoutUrlCredentials(value) : value);
  if (!url || (url.protocol !== 'http:' && url.protocol !== 'https:')) {
    throw new TypeError(`createPaymentsClient: baseUrl must be an http(s) URL such as http://localhost:3000, got ${shown}`);
  }
  if (url.username || url.password) {
    throw new TypeError(`createPaymentsClient: baseUrl must not include credentials (user:password@; the service takes your apiKey), got ${shown}`);
  }
  return (value as string).replace(/\/+$/, '');
}

/**
 * The least per-attempt timeout of the two calls that make the service deliver a webhook within the
 * request (webhooks.sendTest, webhookLogs.retry): it waits up to WEBHOOK_TIMEOUT_MS (30 s by default) for
 * the merchant's endpoint, plus its own work, before answering `{ delivered: false, error: "no response …" }`.
 */
const DELIVERY_CALL_TIMEOUT_MS = 45_000;

/**
 * The least per-attempt timeout of the keyed calls that move money or save a card (payments.create,
 * payments.capture, refunds.create, cards.create). The service answers them once the provider did; a retry
 * with the key while the first attempt still runs waits 10 s for it, then answers 409 "still being processed",
 * so a client timeout below the service's own bound ended a call that went through with CONFLICT `inProgress`
 * and no payment id. The service's longest is a walletpay capture: the order read before it, the capture and the
 * read after a minimal answer, each a token request and the call, each repeated once after a 401 — 12 provider
 * requests of up to PROVIDER_TIMEOUT_MS (15 s by default), 180 s. (A mobilemoney create: up to 3 × 15 s for the
 * token — another caller's fetch waited out for twice the timeout, then its own — and the 15 s push, all again
 * after an invalid-token answer: 120 s.) 4 minutes leaves a minute for the service's own database work, and stays
 * under the 5 minutes Node's built-in fetch waits for an answer's headers, so this timeout is the one that fires.
 * Against a service with a longer PROVIDER_TIMEOUT_MS, pass a call's own timeoutMs (above 12 × it).
 */
const KEYED_CALL_TIMEOUT_MS = 240_000;

/**
 * The least per-attempt timeout of the mobile-money calls the service answers only once the operator did
 * (mobilemoney.checkStatus, reconcile, registerPull; POSTs without a key, never retried): each operator call
 * waits up to PROVIDER_TIMEOUT_MS (15 s by default), after a wait of up to twice that for the OAuth token,
 * a check-status also for the operator's certificate, and a reconcile pages through the pull (up to 500
 * pages). 5 minutes covers the single calls many times over and a reconcile of many pages; it is also as
 * long as Node's built-in fetch waits for an answer's headers (undici's headersTimeout), so a longer floor
 * would not be honoured by it anyway.
 */
const OPERATOR_CALL_TIMEOUT_MS = 300_000;

/**
 * PUT /v1/merchant/webhook makes and returns a new secret each run: a repeat after an attempt that may have
 * run would leave the caller holding a secret the service no longer signs with (the transport's notRepeatable).
 */
const REREGISTERED =
  'the webhook may have been re-registered with a new secret you were not shown: call setWebhook again to get a secret you know';

/**
 * The API key as sent in X-API-Key: printable ASCII without spaces (surrounding whitespace, e.g. an env
 * file's newline, is dropped as fetch drops it), else a TypeError. The key itself is never in the message.
 */
function checkApiKey(value: unknown): string {
  const key = typeof value === 'string' ? value.trim() : '';
  if (!/^[\x21-\x7e]+$/.test(key)) {
    const shown = typeof value === 'string' ? `a ${value.length}-character string${key ? ' with other characters' : ''}` : String(value);
    throw new TypeError(`createPaymentsClient: apiKey must be the pk_… key (printable ASCII without spaces), got ${shown}`);
  }
  return key;
}

export function createPaymentsClient(options: PaymentsClientOptions) {
  const fetchImpl = options.fetch ?? globalThis.fetch;
  if (typeof fetchImpl !== 'function') throw new TypeError('createPaymentsClient: no fetch implementation (Node 18+ has one built in)');
  // Checked here, once: a bad value used to surface only as a PaymentsConnectionError after every retry.
  const baseUrl = checkBaseUrl(options.baseUrl);
  // A key fetch cannot put in a header (e.g. pasted with a non-ASCII quote) failed every attempt as a lost answer.
  const apiKey = checkApiKey(options.apiKey);
  const timeoutMs = checkTimeoutMs(options.timeoutMs ?? 30_000, 'createPaymentsClient');
  /** A call's options with a longer default timeout (at least `floorMs`), unless the call sets its own. */
  const atLeast = <T extends RequestOptions>(floorMs: number, requestOptions?: T): T & { timeoutMs: number } => ({
    ...(requestOptions as T),
    timeoutMs: requestOptions?.timeoutMs ?? Math.max(timeoutMs, floorMs),
  });
  /** The delivery calls' options: they wait for the merchant's endpoint (DELIVERY_CALL_TIMEOUT_MS). */
  const awaitingDelivery = (requestOptions?: RequestOptions) => atLeast(DELIVERY_CALL_TIMEOUT_MS, requestOptions);
  /** The mobile-money operations' options: they wait for the operator (OPERATOR_CALL_TIMEOUT_MS). */
  const awaitingOperator = (requestOptions?: RequestOptions) => atLeast(OPERATOR_CALL_TIMEOUT_MS, requestOptions);
  /** The keyed calls' options (their Idempotency-Key kept): they wait for the provider (KEYED_CALL_TIMEOUT_MS). */
  const awaitingProvider = <T extends RequestOptions>(requestOptions: T) => atLeast(KEYED_CALL_TIMEOUT_MS, requestOptions);
  const api = createFetcher({
    fetch: fetchImpl,
    timeoutMs,
    maxRetries: checkMaxRetries(options.maxRetries ?? 2, 'createPaymentsClient'),
    initialRetryDelayMs: checkDelayMs(options.initialRetryDelayMs ?? 500, 'initialRetryDelayMs', 'createPaymentsClient'),
    maxRetryDelayMs: checkDelayMs(options.maxRetryDelayMs ?? 30_000, 'maxRetryDelayMs', 'createPaymentsClient'),
    ...(options.onRetry ? { onRetry: options.onRetry } : {}),
    notRepeatable: (route) => (route === contract.merchant.setWebhook ? REREGISTERED : undefined),
  });

  /** The ts-rest client: every contract route, `{ status, body, headers }` answers, with retries and timeouts. */
  const raw = initClient(contract, {
    baseUrl,
    baseHeaders: { 'x-api-key': apiKey },
    validateResponse: false,
    api,
  });

  const payments = {
    /**
     * POST /v1/payments. Sends an Idempotency-Key (generated unless given) that its retries reuse. Like capture, refunds.create
     * and cards.create, it waits at least 4 minutes per attempt for the service, which answers once the provider did (KEYED_CALL_TIMEOUT_MS).
     */
    create: (body: CreatePaymentInput, opts: CreatePaymentOptions = {}) => {
      const { options: { idempotencyKey, ...requestOptions }, meta } = idempotent(opts);
      return data(raw.payments.create({ body, headers: { 'idempotency-key': idempotencyKey }, requestOptions: awaitingProvider(requestOptions) }), meta);
    },
    /** GET /v1/payments/{id}, with next_action and the last provider response. */
    get: async (id: string, requestOptions?: RequestOptions) => data(raw.payments.get({ params: { id: pathParam(id) }, requestOptions })),
    /** GET /v1/payments: one page, newest first. */
    list: (q?: ListPaymentsQuery, requestOptions?: RequestOptions): Promise<WithResponse<Page<Payment>>> =>
      ok(raw.payments.list({ query: query(q), requestOptions })),
    /** Every payment matching the filters, across pages: `for await (const p of client.payments.listAll({ status: 'completed' }))`. */
    listAll: (q: ListPaymentsQuery = {}, requestOptions?: RequestOptions) =>
      paginate((page) => payments.list({ ...q, page, page_size: q.page_size ?? 100 }, requestOptions), q.page ?? 1),
    /** GET /v1/payments/{id}/transitions: every status change, oldest first (refused ones with accepted: false); the whole list (one page). */
    transitions: async (id: string, requestOptions?: RequestOptions) => data(raw.payments.transitions({ params: { id: pathParam(id) }, requestOptions })),
    /** POST /v1/payments/{id}/capture: captures an approved walletpay payment. Sends an Idempotency-Key its retries reuse. */
    capture: async (id: string, opts?: IdempotentRequestOptions) => {
      const { options, meta } = idempotent(opts);
      return data(raw.payments.capture({ params: { id: pathParam(id) }, body: {}, requestOptions: awaitingProvider(options) }), meta);
    },
  };

  const cards = {
    /** POST /v1/payments/cards: saves a card from a payment-method token. Sends an Idempotency-Key its retries reuse. */
    create: (body: SaveCardInput, opts?: IdempotentRequestOptions) => {
      const { options, meta } = idempotent(opts);
      return data(raw.payments.createCard({ body, requestOptions: awaitingProvider(options) }), meta);
    },
    list: (q?: ListCardsQuery, requestOptions?: RequestOptions): Promise<WithResponse<Page<SavedCard>>> => ok(raw.payments.listCards({ query: query(q), requestOptions })),
    listAll: (q: ListCardsQuery = {}, requestOptions?: RequestOptions) =>
      paginate((page) => cards.list({ ...q, page, page_size: q.page_size ?? 100 }, requestOptions), q.page ?? 1),
    /**
     * DELETE /v1/payments/cards/{id}: deletes the card (detached at the provider when it can be). Resolves `{ id, deleted: true }` also when
     * a retry finds the card already gone after an attempt whose answer was lost (`$response.alreadyDeleted`).
     */
    delete: async (id: string, requestOptions?: RequestOptions) => deleted(raw.payments.deleteCard({ params: { id: pathParam(id) }, requestOptions }), { id, deleted: true }),
  };

  // Each answers once the operator did: a timeout per attempt of at least 5 minutes (OPERATOR_CALL_TIMEOUT_MS). Not retried.
  const mobilemoney = {
    /** POST /v1/payments/mobilemoney/check-status/{code}: asks the operator; the result arrives later by callback. */
    checkStatus: async (code: string, requestOptions?: RequestOptions) =>
      data(raw.payments.checkStatus({ params: { code: pathParam(code, 'code') }, body: {}, requestOptions: awaitingOperator(requestOptions) })),
    /** POST /v1/payments/mobilemoney/reconcile: settles payments whose callback never came (default: the last 48 hours). */
    reconcile: (window: ReconcileInput = {}, requestOptions?: RequestOptions) => data(raw.payments.reconcile({ body: window, requestOptions: awaitingOperator(requestOptions) })),
    /** POST /v1/payments/mobilemoney/register-pull: one-time registration for the pull API. */
    registerPull: (body: RegisterPullInput = {}, requestOptions?: RequestOptions) => data(raw.payments.registerPull({ body, requestOptions: awaitingOperator(requestOptions) })),
  };

  const refunds = {
    /**
     * POST /v1/refunds: full (no amount) or partial. Sends an Idempotency-Key its retries reuse: pass your own to repeat
     * safely later — within IDEMPOTENCY_KEY_RETENTION (24 h by default), after which the key is forgotten and a retry refunds again.
     */
    create: (body: CreateRefundInput, opts?: IdempotentRequestOptions) => {
      const { options, meta } = idempotent(opts);
      return data(raw.refunds.create({ body, requestOptions: awaitingProvider(options) }), meta);
    },
    get: async (id: string, requestOptions?: RequestOptions) => data(raw.refunds.get({ params: { id: pathParam(id) }, requestOptions })),
    /** GET /v1/refunds: with payment_id that payment's refunds, oldest first; without, all of them, newest first (status, since, until filter). */
    list: (q?: ListRefundsQuery, requestOptions?: RequestOptions): Promise<WithResponse<Page<Refund>>> => ok(raw.refunds.list({ query: query(q), requestOptions })),
    listAll: (q: ListRefundsQuery = {}, requestOptions?: RequestOptions) =>
      paginate((page) => refunds.list({ ...q, page, page_size: q.page_size ?? 100 }, requestOptions), q.page ?? 1),
  };

  const merchant = {
    get: (requestOptions?: RequestOptions) => data(raw.merchant.get({ requestOptions })),
    /**
     * PUT /v1/merchant/webhook: returns the new `whsec_` secret, shown only here. Each run makes a new secret, so it is
     * retried only after attempts that provably did nothing; an error with `mayHaveSucceeded` says the webhook may have
     * been re-registered: call setWebhook again to get a secret you know.
     */
    setWebhook: (webhookUrl: string, requestOptions?: RequestOptions) => data(raw.merchant.setWebhook({ body: { webhook_url: webhookUrl }, requestOptions })),
    /**
     * DELETE /v1/merchant/webhook: turns webhook delivery off (URL and secret removed; deliveries still due end `dead`,
     * POST /v1/webhooks/recover sends them once a URL is registered again). Resolves `{ webhook_url: null, deleted: true }`,
     * also when none was registered, so a retry is harmless.
     */
    deleteWebhook: (requestOptions?: RequestOptions) => data(raw.merchant.deleteWebhook({ requestOptions })),
    /** PUT /v1/merchant/credentials: replaces one provider's credentials; the answer is masked. */
    storeCredentials: (body: StoreCredentialsInput, requestOptions?: RequestOptions) => data(raw.merchant.storeCredentials({ body, requestOptions })),
    /** GET /v1/merchant/credentials: every configured provider's masked summary; the whole list (one page). */
    listCredentials: (requestOptions?: RequestOptions) => data(raw.merchant.listCredentials({ requestOptions })),
    /** DELETE /v1/merchant/credentials/{provider}: like `cards.delete`, a retry that finds them gone resolves (`$response.alreadyDeleted`). */
    deleteCredentials: async (provider: Provider, requestOptions?: RequestOptions) =>
      deleted(raw.merchant.deleteCredentials({ params: { provider: pathParam(provider, 'provider') as Provider }, requestOptions }), { provider, deleted: true }),
  };

  const webhookLogs = {
    list: (q?: ListWebhookLogsQuery, requestOptions?: RequestOptions): Promise<WithResponse<Page<WebhookDelivery>>> =>
      ok(raw.webhookLogs.list({ query: query(q), requestOptions })),
    listAll: (q: ListWebhookLogsQuery = {}, requestOptions?: RequestOptions) =>
      paginate((page) => webhookLogs.list({ ...q, page, page_size: q.page_size ?? 100 }, requestOptions), q.page ?? 1),
    /** One delivery with every attempt made. */
    get: async (id: string, requestOptions?: RequestOptions) => data(raw.webhookLogs.get({ params: { id: pathParam(id) }, requestOptions })),
    /**
     * Re-sends a dead or retrying delivery now (same event id and X-Webhook-Id) and answers once the endpoint
     * did: its timeout per attempt is at least 45 s (the service waits up to WEBHOOK_TIMEOUT_MS for the endpoint). Not retried:
     * while another attempt is sending the delivery it rejects with a PaymentsApiError that is `inProgress` — call it again shortly.
     */
    retry: async (id: string, requestOptions?: RequestOptions) =>
      data(raw.webhookLogs.retry({ params: { id: pathParam(id) }, requestOptions: awaitingDelivery(requestOptions) })),
  };

  const webhooks = {
    /** POST /v1/webhooks/recover: queues again every retrying or dead delivery of the window; answers how many. */
    recover: async (window: RecoverInput, requestOptions?: RequestOptions) =>
      data(raw.webhooks.recover({ body: recoverWindow(window), requestOptions })),
    /**
     * POST /v1/webhooks/test: sends a signed `webhook.test` event now and answers with the attempt's outcome,
     * `{ delivered: false, error: "no response within …" }` for an endpoint that hangs: its timeout per attempt
     * is at least 45 s, longer than the service waits for the endpoint (WEBHOOK_TIMEOUT_MS). Not retried.
     */
    sendTest: (requestOptions?: RequestOptions) => data(raw.webhooks.test({ body: {}, requestOptions: awaitingDelivery(requestOptions) })),
  };

  const events = {
    /** GET /v1/events: one page, newest first; each item is exactly the delivered webhook body. */
    // The contract's schema is one object with a union of data shapes; the body is a WebhookEvent.
    list: (q?: ListEventsQuery, requestOptions?: RequestOptions) => ok(raw.events.list({ query: query(q), requestOptions })) as Promise<WithResponse<Page<Event>>>,
    listAll: (q: ListEventsQuery = {}, requestOptions?: RequestOptions) =>
      paginate((page) => events.list({ ...q, page, page_size: q.page_size ?? 100 }, requestOptions), q.page ?? 1),
    get: async (id: string, requestOptions?: RequestOptions) => data(raw.events.get({ params: { id: pathParam(id) }, requestOptions })) as Promise<WithResponse<Event>>,
  };

  return { payments, cards, mobilemoney, refunds, merchant, webhookLogs, webhooks, events, raw };
}

export type PaymentsClient = ReturnType<typeof createPaymentsClient>;

export { contract } from '../contract/index.js';
export type { ErrorCode } from '../contract/common.js';
export { PaymentsAbortError, PaymentsApiError, PaymentsConnectionError, PaymentsError, type ErrorDetail } from './errors.js';
export { paginate, PAGINATE_REMEMBERED_IDS, type Page, type PageMeta } from './pagination.js';
export { backoffDelay, parseRetryAfter, type RequestOptions, type RetryInfo } from './transport.js';
export { verifyWebhook, WebhookVerificationError } from './webhooks.js';
export { signTestWebhook, type SignedTestWebhook, type SignTestWebhookOptions, type TestWebhookInput } from './test-webhooks.js';
export type { PaymentWebhookEvent, TestWebhookEvent, VerifyWebhookOptions, WebhookEvent, WebhookEventData, WebhookEventType, WebhookVerificationReason } from './webhooks.js';
