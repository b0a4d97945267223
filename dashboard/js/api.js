// The public API, as every merchant integration calls it: X-API-Key, the JSON envelope, nothing private.
// The key lives in this tab's sessionStorage only (gone when the tab closes; never in localStorage or a cookie).

const KEY_STORAGE = 'payments-dashboard.api-key';

export const session = {
  get key() { return sessionStorage.getItem(KEY_STORAGE); },
  signIn(key) { sessionStorage.setItem(KEY_STORAGE, key); },
  signOut() { sessionStorage.removeItem(KEY_STORAGE); },
};

/** A non-2xx answer, carrying the error envelope's code, message, field details and request id. */
export class ApiError extends Error {
  constructor(status, error) {
    super(error?.message ?? `HTTP ${status}`);
    this.status = status;
    this.code = error?.code ?? 'HTTP_ERROR';
    this.details = error?.details ?? [];
    this.requestId = error?.request_id ?? null;
  }
}

/** Calls the API and returns the envelope (`{ success, data, meta? }`); throws ApiError otherwise. */
export async function api(method, path, { query, body, key = session.key } = {}) {
  const url = new URL(path, window.location.origin);
  for (const [name, value] of Object.entries(query ?? {})) {
    if (value !== undefined && value !== null && value !== '') url.searchParams.set(name, String(value));
  }
  const headers = { Accept: 'application/json' };
  if (key) headers['X-API-Key'] = key;
  if (body !== undefined) headers['Content-Type'] = 'application/json';
  let response;
  try {
    response = await fetch(url, { method, headers, body: body === undefined ? undefined : JSON.stringify(body) });
  } catch {
    throw new ApiError(0, { code: 'NETWORK_ERROR', message: 'The service could not be reached. Check your connection and try again.' });
  }
  let envelope = null;
  try {
    envelope = await response.json();
  } catch {
    // not JSON: reported below from the status alone
  }
  if (!response.ok || !envelope?.success) throw new ApiError(response.status, envelope?.error);
  return envelope;
}
