/**
 * Kenyan mobile numbers in the operator's format `254` + 9 digits (decisions.md). Accepted forms:
 * `07XXXXXXXX` / `01XXXXXXXX`, `7XXXXXXXX` / `1XXXXXXXX`, `+254…` and `254…`; spaces, dashes and
 * parentheses are ignored. Anything else → null (the caller answers 422).
 */
export function normalisePhone(input: string): string | null {
  const compact = input.trim().replace(/[\s\-()]/g, '');
  const m = /^(?:\+?254|0)?([17]\d{8})$/.exec(compact);
  return m ? `254${m[1]}` : null;
}
