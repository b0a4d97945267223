import { DomainError } from './errors.js';

/** A list bound as PostgreSQL compares it: a timestamptz literal, UTC, six fractional digits. */
export type Timestamptz = string;

/** An instant from a list filter (RFC 3339): the millisecond a JS Date holds, and the fraction's digits past it. */
interface Instant { ms: number; finer: string }

function instant(value: string): Instant {
  const digits = /\.(\d+)/.exec(value)?.[1] ?? '';
  return { ms: new Date(value).getTime(), finer: digits.slice(3) }; // getTime: the fraction cut to the millisecond
}

function compare(a: Instant, b: Instant): number {
  if (a.ms !== b.ms) return a.ms - b.ms;
  const n = Math.max(a.finer.length, b.finer.length);
  const [x, y] = [a.finer.padEnd(n, '0'), b.finer.padEnd(n, '0')];
  return x < y ? -1 : x > y ? 1 : 0;
}

/**
 * The instant at PostgreSQL's precision: new rows are stamped to the millisecond, but payments created
 * before Migration20261129140500 carry now()'s microseconds, and a filter may carry up to nine fractional
 * digits. A JS Date would cut `…00.0005Z` to `.000`, moving a row stamped `.000700` to the wrong side of
 * either bound, so the bound goes to PostgreSQL as text with its microseconds. A fraction finer than
 * that rounds so that both comparisons stay exact:
 * `created_at > since` down (a row after .0004005 is a row at .000401 or later, i.e. after .000400),
 * `created_at < until` up (a row before .0004005 is a row at .000400 or earlier, i.e. before .000401).
 */
function literal({ ms, finer }: Instant, round: 'down' | 'up'): Timestamptz {
  let us = Number(finer.slice(0, 3).padEnd(3, '0'));
  if (round === 'up' && /[1-9]/.test(finer.slice(3))) us += 1;
  if (us === 1000) [ms, us] = [ms + 1, 0];
  // toISOString writes a year past 9999 as +010000, which PostgreSQL does not read.
  return new Date(ms).toISOString().replace(/^\+0*/, '').replace(/Z$/, `${String(us).padStart(3, '0')}Z`);
}

/** Orders two RFC 3339 instants at every fractional digit they carry (a JS Date keeps milliseconds only). */
export function compareInstants(a: string, b: string): number {
  return compare(instant(a), instant(b));
}

/**
 * The `since`/`until` window of a list: created after `since` and before `until` (both exclusive);
 * since after until (as sent, before rounding) is the merchant's 422.
 */
export function createdWindow(since: string | undefined, until: string | undefined): { since?: Timestamptz; until?: Timestamptz } {
  const from = since ? instant(since) : undefined;
  const to = until ? instant(until) : undefined;
  if (from && to && compare(from, to) > 0) {
    throw new DomainError('VALIDATION_ERROR', 'Invalid request: since must not be after until', [{ field: 'since', issue: 'must not be after until' }]);
  }
  return { ...(from ? { since: literal(from, 'down') } : {}), ...(to ? { until: literal(to, 'up') } : {}) };
}
