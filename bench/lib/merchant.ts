import { createHash, randomBytes, randomUUID } from 'node:crypto';
import type { LoopbackClient } from './http.js';
import { query } from './postgres.js';

const ALL_SCOPES = ['payments:read', 'payments:write', 'refunds:read', 'refunds:write', 'merchant:read', 'merchant:write', 'webhooks:read', 'webhooks:write'];

/** The cardpay signing secret the benchmark merchant configures itself (so it can sign callbacks). */
export const CARDPAY_WEBHOOK_SECRET = `whsec_bench_${randomBytes(16).toString('hex')}`;

export interface BenchMerchant {
  merchantId: string;
  apiKey: string;
}

/**
 * A merchant and an all-scopes API key, written as the admin CLI writes them (only the key's SHA-256
 * is stored). Needs the schema: call after a service process has applied the migrations.
 */
export async function createMerchant(databaseUrl: string, name: string): Promise<BenchMerchant> {
  const merchantId = randomUUID();
  const apiKey = `pk_${randomBytes(32).toString('base64url')}`;
  await query(databaseUrl, 'INSERT INTO merchants (id, name) VALUES ($1, $2)', [merchantId, name]);
  await query(
    databaseUrl,
    'INSERT INTO api_keys (id, merchant_id, key_hash, key_prefix, scopes) VALUES ($1, $2, $3, $4, $5)',
    [randomUUID(), merchantId, createHash('sha256').update(apiKey).digest('hex'), apiKey.slice(0, 10), ALL_SCOPES],
  );
  return { merchantId, apiKey };
}

/** Cardpay credentials with the merchant's own webhook secret (the simulator then sends no events) and a webhook URL. */
export async function configureMerchant(client: LoopbackClient, merchant: BenchMerchant, webhookUrl: string | null): Promise<void> {
  const headers = { 'x-api-key': merchant.apiKey };
  const creds = await client.request({
    method: 'PUT',
    path: '/v1/merchant/credentials',
    headers,
    body: JSON.stringify({ provider: 'cardpay', cardpay: { secret_key: 'sk_test_bench_000001', webhook_secret: CARDPAY_WEBHOOK_SECRET } }),
  });
  if (creds.status !== 200) throw new Error(`could not store cardpay credentials: ${creds.status} ${creds.body}`);
  if (webhookUrl) {
    const hook = await client.request({ method: 'PUT', path: '/v1/merchant/webhook', headers, body: JSON.stringify({ webhook_url: webhookUrl }) });
    if (hook.status !== 200) throw new Error(`could not register the webhook URL: ${hook.status} ${hook.body}`);
  }
}

/** POST /v1/payments for cardpay with a unique Idempotency-Key. */
export function createPayment(client: LoopbackClient, merchant: BenchMerchant, idempotencyKey: string, paymentMethod = 'pm_card_visa') {
  const body: Record<string, string> = { provider: 'cardpay', amount: '25.00', currency: 'USD', payment_method: paymentMethod };
  if (paymentMethod === 'pm_card_threeDSecureRequired') body.return_url = 'https://shop.example.com/return';
  return client.request({
    method: 'POST',
    path: '/v1/payments',
    headers: { 'x-api-key': merchant.apiKey, 'idempotency-key': idempotencyKey },
    body: JSON.stringify(body),
  });
}
