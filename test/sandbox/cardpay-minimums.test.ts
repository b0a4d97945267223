import { describe, expect, it } from '@jest/globals';
import { supportedCurrencies } from '../../server/sandbox/cardpay/currencies.js';
import { USD_PER_UNIT } from '../../server/sandbox/cardpay/exchange-rates.js';

describe('cardpay simulator exchange rates (for the minimum charge in the settlement currency)', () => {
  it('cover every currency the simulator takes, with a positive decimal rate: no currency is taken unchecked', () => {
    const missing = supportedCurrencies().filter((c) => !Object.hasOwn(USD_PER_UNIT, c));
    expect(missing).toEqual([]);
    for (const [currency, rate] of Object.entries(USD_PER_UNIT)) {
      expect(`${currency} ${rate}`).toMatch(/^[a-z]{3} (0|[1-9]\d*)(\.\d+)?$/);
      expect(Number(rate)).toBeGreaterThan(0);
    }
    expect(USD_PER_UNIT.usd).toBe('1');
  });
});
