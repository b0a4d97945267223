/**
 * The mobilemoney simulator's documented test values (M-Pesa Daraja sandbox behaviour).
 *
 * OAuth: any non-empty consumer key / secret pair gets a token, except the consumer secret `bad-secret`,
 * refused as Daraja refuses wrong credentials (HTTP 400 `400.008.01` "Invalid Authentication passed");
 * each new token for a consumer key revokes the previous one, like the real operator. A call with a revoked
 * token (another system sharing the consumer key took a newer one) is refused with HTTP 401 `401.002.01`
 * "Error Occurred - Invalid Access Token"; an unknown or expired token with HTTP 404 `404.001.03` (Pull
 * Transactions: `401.001` for both).
 *
 * STK push outcomes, by the PhoneNumber that receives the prompt (callback after
 * SANDBOX_CALLBACK_DELAY_MS; the STK query answers "being processed" until then):
 *   254708374149  → ResultCode 0 with a receipt (CallbackMetadata)
 *   254700000001  → ResultCode 1032 "Request cancelled by user"
 *   254700000002  → ResultCode 1 "The balance is insufficient for the transaction"
 *   254700000003  → completes with a receipt but NO callback is ever sent (reconciliation by pull)
 *   254700000004  → ResultCode 1037 "DS timeout user cannot be reached"
 *   254700000005  → ResultCode 2001 "The initiator information is invalid." (wrong PIN)
 *   254700000006  → ResultCode 1019 "Transaction has expired"
 *   254700000007  → ResultCode 0 with a receipt, like 254708374149; but while its prompt is open the STK
 *                   query answers HTTP 200 ResponseCode "0", ResultCode "4999" "The transaction is still
 *                   under processing" (Daraja answers either way) instead of the "being processed" error
 *   any other 2547…/2541… → ResultCode 0
 *   any other 254 + 9 digits (no M-Pesa number, e.g. 254212345678)
 *                 → ResultCode 1037 "DS timeout user cannot be reached" (no phone to prompt)
 * A PartyB or TransactionType that does not fit the BusinessShortCode → ResultCode 2028 "The request is not
 * permitted according to product assignment.", before the phone's outcome: 174379 is a paybill (PartyB
 * 174379, CustomerPayBillOnline); for another shortcode a CustomerPayBillOnline push's PartyB must be the
 * shortcode (a CustomerBuyGoodsOnline push names a till the simulator cannot know: any PartyB).
 * While a phone's prompt is open (until its callback time), another push to it is refused as Daraja does:
 * HTTP 500 `500.001.1001` "Unable to lock subscriber, a transaction is already in process for the current
 * subscriber".
 * The Password must be base64(BusinessShortCode + passkey + Timestamp): for the published sandbox shortcode
 * 174379 with its published passkey (SANDBOX_PASSKEY), as Daraja's sandbox checks it; for any other
 * shortcode (the simulator's stand-ins for a merchant's own) any non-empty passkey. Otherwise
 * `500.001.1001` "Wrong credentials".
 *
 * Transaction status (TransactionID = a receipt of this shortcode): result 0 with the transaction's
 * details; an unknown receipt → ResultCode "R000002"; TransactionID `TIMEOUT0000` → nothing to the
 * ResultURL, a queue-timeout notice to the QueueTimeOutURL instead (reversals too). The queue-timeouts
 * control (index.ts) makes the next reversal send its queue-timeout notice and then, carried out all the
 * same, its result: Daraja's timeout notice is no final outcome.
 *
 * Reversal result codes, rules applied in this order:
 *   Remarks or Occasion containing `SIM:<code>` (code one of 0, R000001, R000002, 1, 21, 2001)
 *                                              → that code (forced, for tests)
 *   Initiator other than `testapi` (or `testapi_norole`), or a SecurityCredential that is not
 *   SANDBOX_INITIATOR_PASSWORD encrypted (RSA PKCS#1 v1.5, base64) with the simulator's certificate
 *   (GET /certificates/SandboxCertificate.cer)
 *                                              → 2001 invalid initiator credentials (status queries too)
 *   Initiator `testapi_norole`                 → 21 initiator lacks the reversal role
 *   TransactionID not a receipt of ReceiverParty → R000002 invalid transaction id
 *   receipt already reversed                   → R000001 already reversed
 *   original amount 99999 KES                  → 1 insufficient balance
 *   otherwise                                  → 0 success (the receipt is now reversed)
 *
 * Pull: register answers 1000 the first time for a shortcode, then 1001; the query returns every
 * transaction the simulator completed for the shortcode in the window (last 48 h), 100 rows per page
 * (OffSetValue is a row offset), each with Daraja's transactiontype: `c2b-pay-bill-debit` for a
 * CustomerPayBillOnline push, `c2b-buy-goods-debit` for a CustomerBuyGoodsOnline one. Registration is not
 * required before querying.
 */
export const SANDBOX_SHORTCODE = '174379';
/** Safaricom's published sandbox passkey for shortcode 174379 (the only one the simulator accepts with it). */
export const SANDBOX_PASSKEY = 'bfb279f9aa9bdbcf158e97dd71a467cd2e0c893059b10f78e6b72ada1ed2c919';
/** The simulator's initiator and its password (the operator publishes a sandbox pair the same way). */
export const SANDBOX_INITIATOR = 'testapi';
export const SANDBOX_INITIATOR_PASSWORD = 'Safaricom999!*!';

/** The consumer secret the token endpoint refuses, as Daraja refuses a wrong key or secret. */
export const REJECTED_CONSUMER_SECRET = 'bad-secret';

export const TEST_PHONES = {
  success: '254708374149',
  cancelled: '254700000001',
  insufficientFunds: '254700000002',
  silent: '254700000003',
  unreachable: '254700000004',
  wrongPin: '254700000005',
  expired: '254700000006',
  underProcessing: '254700000007',
} as const;

export const TIMEOUT_TRANSACTION_ID = 'TIMEOUT0000';
export const INVALID_SECURITY_CREDENTIAL = 'invalid-credential';
export const INITIATOR_WITHOUT_ROLE = 'testapi_norole';
export const INSUFFICIENT_BALANCE_AMOUNT = 99999;
export const PULL_PAGE_SIZE = 100;
