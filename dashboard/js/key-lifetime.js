// How long the service remembers an Idempotency-Key: its IDEMPOTENCY_KEY_RETENTION, read from config.json
// (served beside this page). Past it the key is forgotten, and the same key sent again is a new request.

let lifetime = null;

/**
 * The key lifetime in milliseconds, read once per page load; null while config.json cannot be read (read
 * again at the next call). No default is assumed: the service's may have been set shorter than the
 * documented 24 h, and a key resent after the service forgot it is a second refund.
 */
export async function keyLifetimeMs() {
  if (lifetime !== null) return lifetime;
  try {
    const response = await fetch(new URL('../config.json', import.meta.url), { headers: { Accept: 'application/json' } });
    const ms = (await response.json()).idempotency_key_retention_ms;
    if (!response.ok || !Number.isFinite(ms) || ms <= 0) return null;
    lifetime = ms;
    return ms;
  } catch {
    return null;
  }
}

/**
 * Whether a key first sent at `firstSentAt` (ms) may still be sent again, given the lifetime `ms` (as one
 * keyLifetimeMs() call read it, so the answer and the page's wording agree): not once it is near the
 * lifetime (in its last tenth, an hour at most: the request must still arrive in time), nor while the
 * lifetime is unknown (null). The service counts from the key's last change, never earlier than its first
 * sending, so counting from the first sending errs early.
 */
export function stillRemembered(firstSentAt, ms) {
  if (ms === null) return false;
  return Date.now() - firstSentAt < ms - Math.min(ms / 10, 3_600_000);
}

/** "24 hours", "8 seconds": the lifetime as a person reads it. */
export function lifetimeText(ms) {
  if (ms >= 3_600_000) return `${Math.round(ms / 3_600_000)} hours`;
  if (ms >= 60_000) return `${Math.round(ms / 60_000)} minutes`;
  return `${Math.round(ms / 1000)} seconds`;
}
