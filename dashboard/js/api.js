// The public API, as every merchant integration calls it: X-API-Key, the JSON envelope, nothing private.
// The key lives in this tab's sessionStorage only (never in localStorage or a cookie). Sign out ends it: a tab
// the browser restores or duplicates keeps its sessionStorage.

const KEY_STORAGE = 'payments-dashboard.api-key';

export const session = {
  get key() { return sessionStorage.getItem(KEY_STORAGE); },
  signIn(key) { sessionStorage.setItem(KEY_STORAGE, key); },
  signOut() { sessionStorage.removeItem(KEY_STORAGE); },
};

/** A non-2xx answer, carrying the error envelope's code, message, field details and request id. */
export class ApiError extends Error {
  constructor(status, error, retryAfter = null, outcomeUnknown = false) {
    super(error?.message ?? `HTTP ${status}`);
    this.status = status;
    this.code = error?.code ?? 'HTTP_ERROR';
    this.details = error?.details ?? [];
    this.requestId = error?.request_id ?? null;
    /** Retry-After, when the answer had one: "try again" (still processing, rate limited, overloaded). */
    this.retryAfter = retryAfter;
    /** `Payments-Outcome: unknown`: the provider may have acted and the service could not record it. */
    this.outcomeUnknown = outcomeUnknown;
  }

  /**
   * Whether this is the service's own final answer to the request: its envelope, and no Retry-After.
   * Not so for no answer at all, a proxy's error page (no envelope), "still being processed", or an
   * error whose outcome is unknown (the same key again finds out; a new key could act twice).
   */
  get final() {
    return this.status !== 0 && this.code !== 'HTTP_ERROR' && this.retryAfter === null && !this.outcomeUnknown;
  }
}

/**
 * A random UUID v4 for an Idempotency-Key. From getRandomValues: crypto.randomUUID exists only in secure
 * contexts (https, localhost), and the dashboard may be opened over plain http on a private network.
 */
export function newIdempotencyKey() {
  const bytes = crypto.getRandomValues(new Uint8Array(16));
  bytes[6] = (bytes[6] & 0x0f) | 0x40;
  bytes[8] = (bytes[8] & 0x3f) | 0x80;
  const hex = Array.from(bytes, (b) => b.toString(16).padStart(2, '0')).join('');
  return `${hex.slice(0, 8)}-${hex.slice(8, 12)}-${hex.slice(12, 16)}-${hex.slice(16, 20)}-${hex.slice(20)}`;
}

/**
 * Calls the API and returns the envelope (`{ success, data, meta? }`) and `replayed` (the answer replays an
 * earlier request with the same Idempotency-Key); throws ApiError otherwise.
 * `idempotencyKey` is sent as Idempotency-Key: the same key again replays the first answer and does not act
 * again (a refund's key replays for 24 hours after its first answer: IDEMPOTENCY_KEY_RETENTION).
 */
export async function api(method, path, { query, body, idempotencyKey, key = session.key } = {}) {
  const url = new URL(path, window.location.origin);
  for (const [name, value] of Object.entries(query ?? {})) {
    if (value !== undefined && value !== null && value !== '') url.searchParams.set(name, String(value));
  }
  const headers = { Accept: 'application/json' };
  if (key) headers['X-API-Key'] = key;
  if (body !== undefined) headers['Content-Type'] = 'application/json';
  if (idempotencyKey) headers['Idempotency-Key'] = idempotencyKey;
  let response;
  try {
    response = await fetch(url, { method, headers, body: body === undefined ? undefined : JSON.stringify(body) });
  } catch {
    // With a key the request may have been carried out, and trying again (the same key) is what finds out.
    const message = idempotencyKey
      ? 'No answer came back: this may have been done already. Trying again is safe, it will not be done twice.'
      : 'The service could not be reached. Check your connection and try again.';
    throw new ApiError(0, { code: 'NETWORK_ERROR', message });
  }
  let envelope = null;
  try {
    envelope = await response.json();
  } catch {
    // not JSON: reported below from the status alone
  }
  if (!response.ok || !envelope?.success) {
    const err = new ApiError(response.status, envelope?.error, response.headers.get('Retry-After'), response.headers.get('Payments-Outcome') === 'unknown');
    // Not the service's final answer to a keyed request: the same key again finds out, never acting twice.
    // (A 429 was refused before anything was done: it only says when to try again.)
    err.mayHaveActed = Boolean(idempotencyKey) && !err.final && response.status !== 429;
    throw err;
  }
  // Idempotent-Replayed: this answers an earlier request with the same key; nothing new was done.
  return { ...envelope, replayed: response.headers.get('Idempotent-Replayed') === 'true' };
}
