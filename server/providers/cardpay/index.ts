export { CardpayAdapter, prepareCardpayCredentials } from './adapter.js';
export { CARDPAY_API_VERSION } from './client.js';
export { cardpayProvider } from './provider.js';
export { parseCardpayEvent, verifyCardpaySignature, type CardpayNotification } from './webhook.js';
