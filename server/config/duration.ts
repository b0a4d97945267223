/** Parses durations such as `30s`, `2m`, `1h`, `250ms` or a bare number of milliseconds. */
export function parseDurationMs(text: string): number {
  const match = /^\s*(\d+(?:\.\d+)?)\s*(ms|s|m|h|d)?\s*$/i.exec(text);
  if (!match) throw new Error(`not a duration: "${text}"`);
  const value = Number(match[1]);
  const unit = (match[2] ?? 'ms').toLowerCase();
  const factor = { ms: 1, s: 1000, m: 60_000, h: 3_600_000, d: 86_400_000 }[unit as 'ms' | 's' | 'm' | 'h' | 'd'];
  return Math.round(value * factor);
}

/** Parses a comma-separated schedule such as `30s,2m,10m,30m,2h` into milliseconds. */
export function parseSchedule(text: string): number[] {
  return text
    .split(',')
    .map((part) => part.trim())
    .filter(Boolean)
    .map(parseDurationMs);
}
