import { DomainError } from './errors.js';

/** A list bound as PostgreSQL compares it: a timestamptz literal, UTC, six fractional digits. */
export type Timestamptz = string;

/**
 * An instant from a list filter (`since`/`until`, RFC 3339) at PostgreSQL's precision: created_at is
 * stamped to the microsecond (now()), while a filter may carry up to nine fractional digits. A JS Date
 * would cut `…00.0005Z` to `.000`, moving a row stamped `.000700` to the wrong side of either bound,
 * so the bound goes to PostgreSQL as text with its microseconds; a fraction finer than that rounds up,
 * so `created_at >= since` and `created_at < until` stay exact.
 */
function instant(value: string): { ms: number; us: number } {
  const digits = /\.(\d+)/.exec(value)?.[1] ?? '';
  const ms = new Date(value).getTime(); // the fraction cut to the millisecond
  const us = Number(digits.slice(3, 6).padEnd(3, '0')) + (/[1-9]/.test(digits.slice(6)) ? 1 : 0);
  return us === 1000 ? { ms: ms + 1, us: 0 } : { ms, us };
}

function literal({ ms, us }: { ms: number; us: number }): Timestamptz {
  // toISOString writes a year past 9999 as +010000, which PostgreSQL does not read.
  return new Date(ms).toISOString().replace(/^\+0*/, '').replace(/Z$/, `${String(us).padStart(3, '0')}Z`);
}

/** The `since`/`until` window of a list (since inclusive, until exclusive); since after until is the merchant's 422. */
export function createdWindow(since: string | undefined, until: string | undefined): { since?: Timestamptz; until?: Timestamptz } {
  const from = since ? instant(since) : undefined;
  const to = until ? instant(until) : undefined;
  if (from && to && (from.ms > to.ms || (from.ms === to.ms && from.us > to.us))) {
    throw new DomainError('VALIDATION_ERROR', 'Invalid request: since must not be after until', [{ field: 'since', issue: 'must not be after until' }]);
  }
  return { ...(from ? { since: literal(from) } : {}), ...(to ? { until: literal(to) } : {}) };
}
