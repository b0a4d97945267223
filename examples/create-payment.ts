/**
 * Creates a cardpay payment with the sandbox card `pm_card_visa` and prints it.
 *
 *   BASE_URL=http://localhost:3000 API_KEY=pk_… npx tsx examples/create-payment.ts
 *
 * Set CARDPAY_SECRET_KEY (e.g. sk_test_demo_0001) to store cardpay credentials first.
 * Outside this repository, import from 'multi-provider-payments-sdk' instead.
 */
import { createPaymentsClient, PaymentsApiError } from '../client/index.js';

const baseUrl = process.env.BASE_URL ?? 'http://localhost:3000';
const apiKey = process.env.API_KEY;
if (!apiKey) {
  console.error('Set API_KEY to a merchant API key (npm run admin -- key create …)');
  process.exit(1);
}

const client = createPaymentsClient({ baseUrl, apiKey });

try {
  if (process.env.CARDPAY_SECRET_KEY) {
    await client.merchant.storeCredentials({ provider: 'cardpay', cardpay: { secret_key: process.env.CARDPAY_SECRET_KEY } });
  }
  // The SDK sends an Idempotency-Key (a random UUID here) and reuses it if it has to retry.
  // Pass { idempotencyKey: `myshop-order-${orderId}` } to make retries across restarts safe too: keys are
  // unique across the whole service, so prefix your order id with something only your shop uses.
  const payment = await client.payments.create({ provider: 'cardpay', amount: '25.00', currency: 'USD', payment_method: 'pm_card_visa' });
  console.log(JSON.stringify(payment, null, 2));
} catch (error) {
  if (error instanceof PaymentsApiError) {
    console.error(`${error.status} ${error.code}: ${error.message} (request ${error.requestId})`);
    for (const d of error.details) console.error(`  ${d.field}: ${d.issue}`);
    process.exit(1);
  }
  throw error;
}
