/** The mobilemoney (M-Pesa Daraja) provider: adapter, inbound-callback helpers, phone normalisation, status tables. */
export { MobilemoneyAdapter } from './adapter.js';
export {
  MalformedCallbackError,
  callbackToken,
  isAllowedSource,
  parseResult,
  parseStkCallback,
  verifyCallbackToken,
  verifyLiveSignature,
  type OperatorResult,
  type StkCallback,
} from './callback.js';
export { normalisePhone } from './phone.js';
export { mobilemoneyProvider } from './provider.js';
export { reversalResultStatus, reversedAmount, stkResultStatus, type AsyncAck, type PulledTransaction, type PullRegistration } from './transformers.js';
