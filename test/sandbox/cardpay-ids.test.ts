import { describe, expect, it } from '@jest/globals';
import { newId } from '../../server/sandbox/cardpay/db.js';

describe('cardpay simulator ids', () => {
  it('are Stripe-looking (prefix, then alphanumerics) and never repeat, across many refills of the random buffer', () => {
    const ids = Array.from({ length: 5000 }, (_, i) => (i % 3 === 0 ? newId('req', 14) : newId('pi')));
    for (const [i, id] of ids.entries()) expect(id).toMatch(i % 3 === 0 ? /^req_[A-Za-z0-9]{14}$/ : /^pi_[A-Za-z0-9]{24}$/);
    expect(new Set(ids).size).toBe(ids.length);
    // Every character of the alphabet turns up: the bytes are spread over all 62.
    expect(new Set(ids.flatMap((id) => [...id.split('_')[1]!])).size).toBe(62);
  });
});
