/**
 * The operator works in Kenyan time: the STK Password/Timestamp, TransactionDate and the pull API's
 * StartDate/EndDate are East Africa Time (Africa/Nairobi), which is UTC+3 all year (no daylight saving).
 */
const EAT_OFFSET_MS = 3 * 60 * 60 * 1000;

const pad = (n: number, width = 2) => String(n).padStart(width, '0');

function eatFields(date: Date) {
  const d = new Date(date.getTime() + EAT_OFFSET_MS);
  return {
    year: pad(d.getUTCFullYear(), 4),
    month: pad(d.getUTCMonth() + 1),
    day: pad(d.getUTCDate()),
    hour: pad(d.getUTCHours()),
    minute: pad(d.getUTCMinutes()),
    second: pad(d.getUTCSeconds()),
  };
}

/** `YYYYMMDDHHmmss` in EAT: the STK Timestamp, TransactionDate and result times. */
export function darajaTimestamp(date: Date): string {
  const f = eatFields(date);
  return `${f.year}${f.month}${f.day}${f.hour}${f.minute}${f.second}`;
}

/** `YYYY-MM-DD HH:MM:SS` in EAT: the pull API's StartDate / EndDate. */
export function pullDateTime(date: Date): string {
  const f = eatFields(date);
  return `${f.year}-${f.month}-${f.day} ${f.hour}:${f.minute}:${f.second}`;
}

function fromEatParts(parts: string[]): Date | null {
  const [y, mo, d, h, mi, s] = parts.map(Number) as [number, number, number, number, number, number];
  const utc = Date.UTC(y, mo - 1, d, h, mi, s) - EAT_OFFSET_MS;
  const date = new Date(utc);
  // Reject impossible dates (month 13, 31 February …): they would silently roll over.
  return darajaTimestamp(date) === parts.join('') ? date : null;
}

/** Parses `YYYYMMDDHHmmss` (EAT); null when malformed or not a real date. */
export function parseDarajaTimestamp(text: string): Date | null {
  const m = /^(\d{4})(\d{2})(\d{2})(\d{2})(\d{2})(\d{2})$/.exec(text);
  return m ? fromEatParts(m.slice(1)) : null;
}

/** Parses `YYYY-MM-DD HH:MM:SS` (EAT); null when malformed or not a real date. */
export function parsePullDateTime(text: string): Date | null {
  const m = /^(\d{4})-(\d{2})-(\d{2}) (\d{2}):(\d{2}):(\d{2})$/.exec(text);
  return m ? fromEatParts(m.slice(1)) : null;
}
