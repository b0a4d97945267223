/**
 * The SDK's HTTP layer: a ts-rest `api` fetcher that adds a per-attempt timeout and retries with
 * exponential backoff and jitter. A request is retried only when repeating it cannot do something
 * twice: GET/HEAD/PUT/DELETE always, a POST only when it carries an Idempotency-Key (payment
 * creation, refunds, captures, card saves) — except a route that does new work each run (`notRepeatable`),
 * retried only after attempts that provably did nothing. Retries reuse the exact same request, headers
 * included, so the key is the same; only X-Request-Id is new each attempt (requestIdOf). A result (and the error built from it) says when an earlier attempt
 * may have been carried out (earlierAttemptMayHaveSucceeded), so a DELETE's retry that finds nothing can
 * be read as the delete done, and a final "still being processed" 409 is not mistaken for a refusal.
 */
import { randomUUID } from 'node:crypto';
import type { ApiFetcherArgs, AppRoute } from '@ts-rest/core';
import { IdempotencyKeySchema } from '../contract/common.js';
import { outcomeUnknown, parseErrorEnvelope, PaymentsAbortError, PaymentsConnectionError } from './errors.js';

/** Options that apply to one call and override the client's defaults. */
export interface RequestOptions {
  /**
   * Cancels the call, including any wait between retries: it rejects with PaymentsAbortError (the signal's
   * reason as `cause`, the call's `idempotencyKey`), since a request already sent may have been carried out.
   */
  signal?: AbortSignal;
  /** Per-attempt timeout in milliseconds: an integer from 1 to 2^31-1 (else the call rejects with a TypeError, unsent). */
  timeoutMs?: number;
  /** Retries after the first attempt (0 disables retrying): a non-negative integer (else a TypeError, unsent). */
  maxRetries?: number;
}

/** What the SDK itself adds to a call (not part of the public RequestOptions). */
export interface SdkCallOptions extends RequestOptions {
  /** Sent as Idempotency-Key; makes a POST safe to retry (the retries carry the same key). */
  idempotencyKey?: string;
}

/** What `onRetry` is told before the SDK waits and tries again. */
export interface RetryInfo {
  method: string;
  url: string;
  /** The attempt that is about to start (2 for the first retry). */
  attempt: number;
  /** How long the SDK waits first: the Retry-After value when the server sent one. */
  delayMs: number;
  /** The status that caused the retry, or undefined for a network error or timeout. */
  status?: number;
  error?: unknown;
}

export interface TransportOptions {
  fetch: typeof globalThis.fetch;
  timeoutMs: number;
  maxRetries: number;
  /** First backoff step; doubles per retry up to maxRetryDelayMs, with jitter. */
  initialRetryDelayMs: number;
  /** Longest wait between attempts; a Retry-After above it ends the retries. */
  maxRetryDelayMs: number;
  onRetry?: (info: RetryInfo) => void;
  /**
   * For a route whose every run does new work (PUT /v1/merchant/webhook makes a new secret), what a caller
   * must know when an attempt may have been carried out: such a call is retried only after attempts that
   * provably did nothing (refused connection, failed DNS lookup, 408, 429, the service's own 503), and this text ends the
   * message of the error it throws when one may have. Undefined for every other route.
   */
  notRepeatable?: (route: AppRoute) => string | undefined;
}

export type SdkFetcherArgs = ApiFetcherArgs & { requestOptions?: SdkCallOptions };
export interface FetcherResult {
  status: number;
  body: unknown;
  headers: Headers;
  /**
   * Set when an earlier attempt of this call may have been carried out although its answer was lost:
   * it got no answer at all (a network error after connecting, a timeout; not a refused connection or
   * failed DNS lookup, which prove the request never left) or a 5xx that can follow work the
   * service did. Then this answer may describe the state after that attempt (a DELETE's retry finds
   * the resource gone).
   */
  earlierAttemptMayHaveSucceeded?: true;
  /**
   * Set when this call's operation may have been, or may yet be, carried out: an earlier attempt may have
   * been, this answer is one that can follow work the service did (a 5xx other than 501, 505, the service's
   * own 503 and 502 PROVIDER_ERROR; a 503 without the error envelope — a proxy's, which may have forwarded
   * the request — and a 502 PROVIDER_ERROR with Payments-Outcome: unknown are such answers), it is the 409 saying
   * a request with this call's Idempotency-Key is still running, or it is a write's 2xx without the success
   * envelope (not a redirect: the service never sends one, and whatever did, did not forward the request).
   */
  mayHaveSucceeded?: true;
  /** The route's `notRepeatable` text, for the error built from this answer. */
  notRepeatable?: string;
  /** The Idempotency-Key the request carried, so results and errors can hand it back to the caller. */
  idempotencyKey?: string;
  /** The X-Request-Id this answer's attempt sent: the id to quote when the answer carries none (a proxy's own page). */
  sentRequestId?: string;
}

/**
 * 408, 429 and every 5xx but 501 and 505 signal a passing condition (a CDN's 520–524 too); 501 and 505
 * never heal, and 502 PROVIDER_ERROR is a provider's final answer (isRetryableResponse).
 */
const retryableStatus = (status: number) => status === 408 || status === 429 || (status >= 500 && status <= 599 && status !== 501 && status !== 505);
/** The service's `{ success: false, error: { code, message } }` envelope (parseErrorEnvelope, as PaymentsApiError reads it). */
const isErrorEnvelope = (body: unknown): boolean => parseErrorEnvelope(body) !== undefined;
/**
 * Retried answers that do not prove the request was not carried out: every retried 5xx but the service's own
 * 503 (408, 429 and the service's 503, in its error envelope, refuse the request before any work). A 503
 * without the envelope comes from a proxy in front of the service (Heroku's H12/H13, Envoy's reset before
 * headers, a load balancer's page), which may have forwarded the request and lost the service's answer.
 */
const maybeDoneAnswer = (status: number, body: unknown) => status >= 500 && retryableStatus(status) && !(status === 503 && isErrorEnvelope(body));
const SAFE_METHODS = new Set(['GET', 'HEAD', 'PUT', 'DELETE', 'OPTIONS']);
/** Methods that change something: an answer that says nothing about what happened leaves them maybe done. */
const WRITE_METHODS = new Set(['POST', 'PUT', 'PATCH', 'DELETE']);

/** The service's `{ success: true, data }` envelope, which every one of its 2xx answers is. */
export const isSuccessEnvelope = (body: unknown): boolean =>
  typeof body === 'object' && body !== null && (body as { success?: unknown }).success === true && 'data' in body;

/**
 * An answer the service never gives: a redirect (not followed: a POST would come back as a GET of another
 * route, and a redirect to another host would carry X-API-Key and Idempotency-Key there; fetch with
 * `redirect: 'manual'` hands it over as it is, or as an opaque redirect of status 0), any other status
 * below 200, or a 2xx without the success envelope (an SSO proxy's login page, a wrong baseUrl).
 * Something else answered. A redirect means the request was not forwarded to the service (it never
 * redirects); a 2xx without the envelope tells nothing of what a write did (writeUnaccounted).
 */
export const unexpectedAnswer = (response: Response, body: unknown): boolean =>
  response.type === 'opaqueredirect' || response.status < 200 || (response.status >= 300 && response.status < 400) || (response.status < 300 && !isSuccessEnvelope(body));
/** Connect-phase failures (no connection, no DNS answer): the request never left, so that attempt did nothing. */
const NEVER_SENT_CODES = new Set(['ECONNREFUSED', 'ENOTFOUND', 'EAI_AGAIN', 'UND_ERR_CONNECT_TIMEOUT']);

/** True when a thrown fetch error proves the request was not sent: the first `code` along its cause chain (undici: `cause.code`) is a connect-phase one. */
function neverSent(error: unknown): boolean {
  let current = error;
  for (let depth = 0; depth < 5 && current !== null && typeof current === 'object'; depth++) {
    const code = (current as { code?: unknown }).code;
    if (typeof code === 'string') return NEVER_SENT_CODES.has(code);
    current = (current as { cause?: unknown }).cause;
  }
  return false;
}

/**
 * Throws a TypeError unless `value` is an Idempotency-Key the contract accepts (1–255 printable ASCII: fetch
 * cannot send other characters) and fetch sends as it is: fetch trims a header value, so `' '` would arrive
 * empty and `'order-1 '` as `'order-1'`, another key than the one the caller keeps and the errors report.
 */
export function checkIdempotencyKey(value: unknown, where: string): string {
  if (typeof value !== 'string' || !IdempotencyKeySchema.safeParse(value).success) {
    throw new TypeError(`${where}: idempotencyKey must be 1–255 printable ASCII characters (space to ~), got ${JSON.stringify(value)}`);
  }
  if (value.trim() !== value) {
    throw new TypeError(`${where}: idempotencyKey must not start or end with a space (fetch would strip it), got ${JSON.stringify(value)}`);
  }
  return value;
}

/** A header's value, whatever the case of its name; undefined when absent or empty. */
const headerValue = (headers: Record<string, string>, name: string): string | undefined =>
  Object.entries(headers).find(([key, value]) => key.toLowerCase() === name && value)?.[1];

/**
 * The X-Request-Id an attempt sends: the caller's own (a raw call's header), else a new UUID per attempt, which
 * the service keeps (it takes a well-formed one) and logs. So an attempt whose answer was lost still has an id
 * to quote (PaymentsConnectionError.requestId), and each attempt of a retried call its own.
 */
const requestIdOf = (callerRequestId: string | undefined): string => callerRequestId ?? randomUUID();

export function isRetrySafe(method: string, headers: Record<string, string>): boolean {
  if (SAFE_METHODS.has(method.toUpperCase())) return true;
  return headerValue(headers, 'idempotency-key') !== undefined;
}

/** Retry-After as milliseconds: delta-seconds or an HTTP date; undefined when absent or unreadable. */
export function parseRetryAfter(value: string | null, now: number = Date.now()): number | undefined {
  if (value === null) return undefined;
  const text = value.trim();
  if (/^\d+(\.\d+)?$/.test(text)) return Math.round(Number(text) * 1000);
  const date = Date.parse(text);
  return Number.isNaN(date) ? undefined : Math.max(0, date - now);
}

/** Exponential backoff with equal jitter: half the step is fixed, half random. */
export function backoffDelay(retry: number, initialMs: number, maxMs: number, random: () => number = Math.random): number {
  const step = Math.min(maxMs, initialMs * 2 ** retry);
  return Math.round(step / 2 + random() * (step / 2));
}

/** setTimeout's range: a longer (or non-integer, or non-finite) timeout would not time out as asked. */
const MAX_TIMEOUT_MS = 2 ** 31 - 1;

/** Throws a TypeError unless timeoutMs is a whole number of milliseconds setTimeout can wait (1 … 2^31-1). */
export function checkTimeoutMs(value: unknown, where: string): number {
  if (typeof value !== 'number' || !Number.isInteger(value) || value < 1 || value > MAX_TIMEOUT_MS) {
    throw new TypeError(`${where}: timeoutMs must be an integer from 1 to ${MAX_TIMEOUT_MS}, got ${String(value)}`);
  }
  return value;
}

/** Throws a TypeError unless `name` (a retry delay) is a whole number of milliseconds setTimeout can wait (0 … 2^31-1). */
export function checkDelayMs(value: unknown, name: string, where: string): number {
  if (typeof value !== 'number' || !Number.isInteger(value) || value < 0 || value > MAX_TIMEOUT_MS) {
    throw new TypeError(`${where}: ${name} must be an integer from 0 to ${MAX_TIMEOUT_MS}, got ${String(value)}`);
  }
  return value;
}

/**
 * `text` with the user:password@ of any URL in it shown as `***@`, for messages that quote an address or a foreign
 * error's text (fetch's own errors quote the URL): no SDK message carries credentials. The userinfo ends at its
 * last `@` before the path, as a URL parser reads it.
 */
export function withoutUrlCredentials(text: string): string {
  return text.replace(/\/\/[^/?#\s]*@/g, '//***@');
}

/** Throws a TypeError unless maxRetries is a non-negative integer. */
export function checkMaxRetries(value: unknown, where: string): number {
  if (typeof value !== 'number' || !Number.isInteger(value) || value < 0) {
    throw new TypeError(`${where}: maxRetries must be a non-negative integer, got ${String(value)}`);
  }
  return value;
}

/**
 * A 409 with Retry-After: a request with this Idempotency-Key is still being processed (every other
 * conflict is final and comes without it). Retried with the same key, it answers the first request's result.
 */
const stillProcessing = (status: number, response: Response) => status === 409 && response.headers.has('retry-after');

/** The service's 502 PROVIDER_ERROR, in its envelope: a look-alike from something else is not a provider's final answer. */
const isProviderError = (body: unknown) => parseErrorEnvelope(body)?.code === 'PROVIDER_ERROR';

function isRetryableResponse(status: number, body: unknown, response: Response): boolean {
  if (stillProcessing(status, response)) return true;
  return retryableStatus(status) && !isProviderError(body);
}

/**
 * A retryable answer that may follow work the service did (500, 502, 504, 52x…, a 503 not in the service's
 * envelope; not a refusal nor a provider's final answer), or a 502 PROVIDER_ERROR saying the provider's outcome is unknown.
 */
const mayFollowWork = (status: number, body: unknown, response: Response) =>
  maybeDoneAnswer(status, body) && (!isProviderError(body) || outcomeUnknown(response.headers));

async function readBody(response: Response): Promise<unknown> {
  const text = await response.text();
  if (text === '') return undefined;
  const type = response.headers.get('content-type') ?? '';
  if (type.includes('json')) {
    try {
      return JSON.parse(text);
    } catch {
      return text;
    }
  }
  return text;
}

/** Waits `ms`, or less when the signal aborts first: the caller looks at the signal afterwards. */
function sleep(ms: number, signal?: AbortSignal): Promise<void> {
  return new Promise((resolve) => {
    if (signal?.aborted) return resolve();
    const done = () => {
      clearTimeout(timer);
      signal?.removeEventListener('abort', done);
      resolve();
    };
    const timer = setTimeout(done, ms);
    signal?.addEventListener('abort', done, { once: true });
  });
}

/**
 * A signal that aborts when either does. AbortSignal.any is Node 20.3+, and the package supports Node
 * 18.18: without it, a controller the two forward their abort to (both listeners go with the first abort).
 */
function eitherSignal(a: AbortSignal, b: AbortSignal): AbortSignal {
  if (typeof AbortSignal.any === 'function') return AbortSignal.any([a, b]);
  const controller = new AbortController();
  for (const source of [a, b]) {
    if (source.aborted) {
      controller.abort(source.reason);
      break;
    }
    source.addEventListener('abort', () => controller.abort(source.reason), { once: true, signal: controller.signal });
  }
  return controller.signal;
}

export function createFetcher(options: TransportOptions) {
  return async function sdkFetcher(args: SdkFetcherArgs): Promise<FetcherResult> {
    const call = args.requestOptions ?? {};
    // A bad per-call value is the caller's mistake: reject before sending anything, not a retried failure.
    const maxRetries = call.maxRetries === undefined ? options.maxRetries : checkMaxRetries(call.maxRetries, `${args.method} ${args.path}`);
    const timeoutMs = call.timeoutMs === undefined ? options.timeoutMs : checkTimeoutMs(call.timeoutMs, `${args.method} ${args.path}`);
    const headers = call.idempotencyKey === undefined ? args.headers : { ...args.headers, 'idempotency-key': call.idempotencyKey };
    // payments.create sends its key as a contract header, the other idempotent calls through requestOptions.
    // A key fetch cannot send (e.g. 'заказ-1042': not a ByteString) failed every attempt, looking like a lost answer.
    for (const [name, value] of Object.entries(headers)) {
      if (name.toLowerCase() === 'idempotency-key') checkIdempotencyKey(value, `${args.method} ${args.path}`);
    }
    const retrySafe = isRetrySafe(args.method, headers);
    const idempotencyKey = headerValue(headers, 'idempotency-key');
    const callerRequestId = headerValue(headers, 'x-request-id');
    /** The X-Request-Id of the last attempt sent; null while none was. */
    let lastRequestId: string | null = null;
    const notRepeatable = options.notRepeatable?.(args.route);
    const userSignal = call.signal ?? args.fetchOptions?.signal ?? undefined;
    const plural = (attempts: number) => `${attempts} attempt${attempts === 1 ? '' : 's'}`;
    // The caller's abort is still a connection error: an attempt it cut short may have been carried out,
    // so the error hands back the key to retry with (a bare DOMException would not). `inFlight`: it cut one short.
    const abortedByCaller = (attempts: number, inFlight: boolean) =>
      new PaymentsAbortError(
        withNote(`${args.method} ${args.path} aborted by the caller's signal ${attempts === 0 ? 'before anything was sent' : `(${plural(attempts)})`}`, maybeDone || inFlight),
        attempts,
        { cause: userSignal?.reason, idempotencyKey, mayHaveSucceeded: maybeDone || inFlight, requestId: lastRequestId },
      );
    /** The route's `notRepeatable` text after a message, when an attempt may have been carried out. */
    const withNote = (message: string, mayHaveSucceeded: boolean) => (notRepeatable && mayHaveSucceeded ? `${message}; ${notRepeatable}` : message);

    /**
     * This answer may follow work the service did for this call, or announce it under way: a mayFollowWork
     * answer, or the 409 saying a request with this call's key is still running. (Without a key, that 409
     * is another store or deletion of credentials, or another attempt at a delivery, running: this attempt
     * was refused before doing anything.)
     */
    const answerMayFollowWork = (response: Response, body: unknown) =>
      mayFollowWork(response.status, body, response) || (stillProcessing(response.status, response) && idempotencyKey !== undefined);
    /**
     * A write answered 2xx without the success envelope: something between answered in the service's place
     * after the request may have reached the service and run. Not a redirect (3xx, or an opaque redirect of
     * status 0): the service never redirects, and a proxy answering one did not forward the request.
     */
    const writeUnaccounted = (response: Response, body: unknown) =>
      WRITE_METHODS.has(args.method.toUpperCase()) && response.type !== 'opaqueredirect' && response.status >= 200 && response.status < 300 && !isSuccessEnvelope(body);

    let maybeDone = false;
    const result = (response: Response, body: unknown): FetcherResult => {
      const mayHaveSucceeded = maybeDone || answerMayFollowWork(response, body) || writeUnaccounted(response, body);
      return {
        status: response.status,
        body,
        headers: response.headers,
        ...(maybeDone ? { earlierAttemptMayHaveSucceeded: true as const } : {}),
        ...(mayHaveSucceeded ? { mayHaveSucceeded: true as const } : {}),
        ...(notRepeatable ? { notRepeatable } : {}),
        ...(idempotencyKey ? { idempotencyKey } : {}),
        ...(lastRequestId ? { sentRequestId: lastRequestId } : {}),
      };
    };

    for (let attempt = 1; ; attempt++) {
      // Before the first attempt, or after the wait between two.
      if (userSignal?.aborted) throw abortedByCaller(attempt - 1, false);
      const canRetry = retrySafe && attempt <= maxRetries;
      let retry: Omit<RetryInfo, 'method' | 'url' | 'attempt'>;
      // Outside the try: a failure to set up the attempt is not a network error, and not worth retrying.
      const timeout = AbortSignal.timeout(timeoutMs);
      const signal = userSignal ? eitherSignal(userSignal, timeout) : timeout;
      lastRequestId = requestIdOf(callerRequestId);
      // The caller's own header stays as it is (added again under another case, fetch would send both joined).
      const attemptHeaders = callerRequestId ? headers : { ...headers, 'x-request-id': lastRequestId };
      try {
        // Never follow a redirect (unexpectedAnswer): the SDK turns it into an error instead.
        const response = await options.fetch(args.path, { ...args.fetchOptions, method: args.method, headers: attemptHeaders, body: args.body ?? null, signal, redirect: 'manual' });
        const body = await readBody(response);
        if (!canRetry || !isRetryableResponse(response.status, body, response)) return result(response, body);
        // This attempt may have done the work: repeating it would do it again.
        if (notRepeatable && mayFollowWork(response.status, body, response)) return result(response, body);
        const retryAfter = parseRetryAfter(response.headers.get('retry-after'));
        // Waiting longer than the server asks would be fine; retrying sooner would not. Too long a wait: give up.
        if (retryAfter !== undefined && retryAfter > options.maxRetryDelayMs) return result(response, body);
        if (answerMayFollowWork(response, body)) maybeDone = true;
        retry = { delayMs: retryAfter ?? backoffDelay(attempt - 1, options.initialRetryDelayMs, options.maxRetryDelayMs), status: response.status };
      } catch (error) {
        if (userSignal?.aborted) throw abortedByCaller(attempt, true);
        // Sent, perhaps carried out, but no (whole) answer came back; unless it provably never left.
        const sent = !neverSent(error);
        if (sent) maybeDone = true;
        if (!canRetry || (notRepeatable && sent)) {
          const what = (error as Error)?.name === 'TimeoutError' ? `timed out after ${timeoutMs} ms` : `failed: ${withoutUrlCredentials(String((error as Error)?.message ?? error))}`;
          const message = withNote(`${args.method} ${args.path} ${what} (${plural(attempt)})`, maybeDone);
          throw new PaymentsConnectionError(message, attempt, { cause: error, idempotencyKey, mayHaveSucceeded: maybeDone, requestId: lastRequestId });
        }
        retry = { delayMs: backoffDelay(attempt - 1, options.initialRetryDelayMs, options.maxRetryDelayMs), error };
      }
      options.onRetry?.({ method: args.method, url: args.path, attempt: attempt + 1, ...retry });
      await sleep(retry.delayMs, userSignal);
    }
  };
}
