import { DomainError } from './errors.js';

/**
 * An instant from a list filter (`since`/`until`, RFC 3339). Rows are stamped to the millisecond, while a
 * filter may carry up to nine fractional digits (Python's isoformat sends six): a fraction below the
 * millisecond is rounded up, so `created_at >= since` and `created_at < until` stay exact (Date would
 * cut `…30.1235Z` to `.123`, moving a row stamped `.123` to the wrong side of either bound).
 */
function instant(value: string): Date {
  const date = new Date(value);
  const sub = /\.\d{3}(\d+)/.exec(value)?.[1];
  return sub && /[1-9]/.test(sub) ? new Date(date.getTime() + 1) : date;
}

/** The `since`/`until` window of a list (since inclusive, until exclusive); since after until is the merchant's 422. */
export function createdWindow(since: string | undefined, until: string | undefined): { since?: Date; until?: Date } {
  const window = { ...(since ? { since: instant(since) } : {}), ...(until ? { until: instant(until) } : {}) };
  if (window.since && window.until && window.since > window.until) {
    throw new DomainError('VALIDATION_ERROR', 'Invalid request: since must not be after until', [{ field: 'since', issue: 'must not be after until' }]);
  }
  return window;
}
