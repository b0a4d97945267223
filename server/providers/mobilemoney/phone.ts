/**
 * Kenyan phone numbers in the contract's format `254` + 9 digits (interface.md, decisions.md): every such
 * number is taken, whether or not it is on M-Pesa (the operator answers that, as it answers a number that
 * is switched off). Local forms normalised: `07XXXXXXXX` / `01XXXXXXXX`, `7XXXXXXXX` / `1XXXXXXXX`, and
 * `+254…`; spaces, dashes and parentheses are ignored. Anything else → null (the caller answers 422).
 */
export function normalisePhone(input: string): string | null {
  const compact = input.trim().replace(/[\s\-()]/g, '');
  const m = /^(?:\+?254(\d{9})|0?([17]\d{8}))$/.exec(compact);
  return m ? `254${m[1] ?? m[2]}` : null;
}
