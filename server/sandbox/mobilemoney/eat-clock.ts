/**
 * The operator's clock: East Africa Time, written as `YYYYMMDDHHmmss` (STK Timestamp, TransactionDate)
 * or `YYYY-MM-DD HH:MM:SS` (pull StartDate / EndDate). The simulator's own implementation, through
 * the platform's time-zone database, on purpose apart from the adapter's: a clock bug in the adapter
 * then shows up as a refused request here instead of being mirrored.
 */
const formatter = new Intl.DateTimeFormat('en-GB', {
  timeZone: 'Africa/Nairobi',
  year: 'numeric',
  month: '2-digit',
  day: '2-digit',
  hour: '2-digit',
  minute: '2-digit',
  second: '2-digit',
  hourCycle: 'h23',
});

interface Parts {
  year: string;
  month: string;
  day: string;
  hour: string;
  minute: string;
  second: string;
}

function nairobiParts(date: Date): Parts {
  const parts = Object.fromEntries(formatter.formatToParts(date).map((p) => [p.type, p.value]));
  return { year: parts.year!, month: parts.month!, day: parts.day!, hour: parts.hour!, minute: parts.minute!, second: parts.second! };
}

/** `YYYYMMDDHHmmss` in Nairobi time. */
export function operatorTimestamp(date: Date): string {
  const p = nairobiParts(date);
  return `${p.year}${p.month}${p.day}${p.hour}${p.minute}${p.second}`;
}

/** Nairobi has been UTC+3 without daylight saving since 1960: a wall-clock reading is that instant minus 3 h. */
function fromNairobiWallClock(p: Parts): Date | null {
  const date = new Date(Date.UTC(+p.year, +p.month - 1, +p.day, +p.hour, +p.minute, +p.second) - 3 * 3_600_000);
  const back = nairobiParts(date);
  const same = (Object.keys(p) as (keyof Parts)[]).every((k) => back[k] === p[k]);
  return same ? date : null; // 31 February, hour 24 …: refused, as the operator does
}

/** Parses `YYYYMMDDHHmmss` (Nairobi time); null when malformed or not a real date. */
export function parseOperatorTimestamp(text: string): Date | null {
  const m = /^(\d{4})(\d{2})(\d{2})(\d{2})(\d{2})(\d{2})$/.exec(text);
  if (!m) return null;
  const [, year, month, day, hour, minute, second] = m as unknown as [string, string, string, string, string, string, string];
  return fromNairobiWallClock({ year, month, day, hour, minute, second });
}

/** Parses the pull API's `YYYY-MM-DD HH:MM:SS` (Nairobi time); null when malformed or not a real date. */
export function parsePullWindowTime(text: string): Date | null {
  const m = /^(\d{4})-(\d{2})-(\d{2}) (\d{2}):(\d{2}):(\d{2})$/.exec(text);
  if (!m) return null;
  const [, year, month, day, hour, minute, second] = m as unknown as [string, string, string, string, string, string, string];
  return fromNairobiWallClock({ year, month, day, hour, minute, second });
}
