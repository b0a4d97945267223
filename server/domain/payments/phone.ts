/**
 * decisions.md: `254` + 9 digits; the local forms `07XXXXXXXX`, `01XXXXXXXX`, `7XXXXXXXX`, `1XXXXXXXX`
 * and `+254…` are normalised. Anything else is null.
 */
export function normalisePhone(input: string): string | null {
  const compact = input.replace(/[\s-]/g, '');
  const match = /^(?:\+?254|0)?([17]\d{8})$/.exec(compact);
  return match ? `254${match[1]}` : null;
}
