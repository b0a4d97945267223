import { InvalidAmountError, toMinorUnits as parseMinorUnits, type DecimalPlaces } from '../../lib/money.js';
import { DomainError } from '../errors.js';

export { compareDecimals, currencyDigits, formatMinorUnits, isPaymentCurrency } from '../../lib/money.js';

/** lib/money's parser, with a malformed amount reported as the merchant's validation error (422). */
export function toMinorUnits(value: string | number, currency: string, field = 'amount', places: DecimalPlaces = 'written'): bigint {
  try {
    return parseMinorUnits(value, currency, field, places);
  } catch (err) {
    if (err instanceof InvalidAmountError) throw new DomainError('VALIDATION_ERROR', err.message, [{ field: err.field, issue: err.issue }]);
    throw err;
  }
}
