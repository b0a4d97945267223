/** Parses durations such as `30s`, `2m`, `1h`, `250ms` or a bare number of milliseconds. */
export function parseDurationMs(text: string): number {
  const match = /^\s*(\d+(?:\.\d+)?)\s*(ms|s|m|h|d)?\s*$/i.exec(text);
  if (!match) throw new Error(`not a duration: "${text}"`);
  const value = Number(match[1]);
  const unit = (match[2] ?? 'ms').toLowerCase();
  const factor = { ms: 1, s: 1000, m: 60_000, h: 3_600_000, d: 86_400_000 }[unit as 'ms' | 's' | 'm' | 'h' | 'd'];
  return Math.round(value * factor);
}

/**
 * Parses a comma-separated schedule such as `30s,2m,10m,30m,2h` into milliseconds. At least one delay
 * and no empty entry: `WEBHOOK_RETRY_SCHEDULE=","` meant no retry at all (one attempt, then dead), and
 * `30s,,2m` is a typo, not a choice.
 */
export function parseSchedule(text: string): number[] {
  const parts = text.split(',').map((part) => part.trim());
  if (parts.some((part) => part === '')) throw new Error(`"${text}" has an empty entry: list at least one delay, separated by commas`);
  return parts.map(parseDurationMs);
}
