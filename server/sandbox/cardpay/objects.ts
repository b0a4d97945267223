import { createHash } from 'node:crypto';
import { newId, nowSec } from './db.js';
import type { TestCard } from './test-cards.js';
import { testBankAccount, testCard } from './test-cards.js';

/** The API version the simulator reports in events (the one stripe-node 22.5 pins). */
export const SIM_API_VERSION = '2026-07-29.dahlia';

// Rows as PostgreSQL returns them (bigint columns arrive as strings, jsonb already parsed).
export interface IntentRow {
  id: string;
  account: string;
  amount: string;
  currency: string;
  status: string;
  payment_method: string | null;
  customer: string | null;
  description: string | null;
  return_url: string | null;
  /** The last confirmation's off_session (per request, as at Stripe: omitted is on-session). */
  off_session: boolean;
  /** `on_session` / `off_session`: a success sets the payment method up for future payments (charging.ts). */
  setup_future_usage: string | null;
  automatic_payment_methods: Record<string, unknown> | null;
  metadata: Record<string, string>;
  next_action: Record<string, unknown> | null;
  last_payment_error: Record<string, unknown> | null;
  latest_charge: string | null;
  amount_received: string;
  amount_refunded: string;
  client_secret: string;
  /** The secret of the 3-D Secure page of the intent's last confirmation that asked for it (charging.ts confirm); never answered but in that page's URL. */
  authentication_secret: string | null;
  cancellation_reason: string | null;
  canceled_at: string | null;
  created: string;
}

export interface PaymentMethodRow {
  id: string;
  account: string;
  token: string;
  customer: string | null;
  detached: boolean;
  /** The intent this PaymentMethod was first confirmed with while attached to no Customer (single use: see payment-intents.ts). */
  used_with_intent: string | null;
  /** Set up for future payments by a payment with setup_future_usage. */
  set_up: boolean;
  metadata: Record<string, string>;
  created: string;
}

export interface CustomerRow {
  id: string;
  account: string;
  email: string | null;
  name: string | null;
  description: string | null;
  metadata: Record<string, string>;
  created: string;
}

export interface RefundRow {
  id: string;
  account: string;
  payment_intent: string;
  charge: string;
  amount: string;
  currency: string;
  status: string;
  reason: string | null;
  metadata: Record<string, string>;
  created: string;
  failure_reason?: string | null;
}

export interface EndpointRow {
  id: string;
  account: string;
  url: string;
  secret: string;
  enabled_events: string[];
  description: string | null;
  metadata: Record<string, string>;
  /** The version its events are rendered in; null: the account's default. */
  api_version: string | null;
  created: string;
}

export type StripeObject = Record<string, unknown> & { id: string; object: string };

const num = (v: string | number | null): number | null => (v === null ? null : Number(v));

export function cardOf(row: PaymentMethodRow): TestCard {
  const card = testCard(row.token);
  if (!card) throw new Error(`payment method ${row.id} has an unknown token`);
  return card;
}

function cardDetails(row: PaymentMethodRow) {
  const card = cardOf(row);
  const year = new Date(Number(row.created) * 1000).getUTCFullYear();
  return {
    brand: card.brand,
    checks: { address_line1_check: null, address_postal_code_check: null, cvc_check: 'pass' },
    country: card.country,
    display_brand: card.brand,
    exp_month: 12,
    exp_year: year + 3,
    fingerprint: createHash('sha256').update(row.token).digest('base64url').slice(0, 16),
    funding: card.funding,
    generated_from: null,
    last4: card.last4,
    networks: { available: [card.brand], preferred: null },
    three_d_secure_usage: { supported: true },
    wallet: null,
  };
}

export function paymentMethodObject(row: PaymentMethodRow): StripeObject {
  const bank = testBankAccount(row.token);
  return {
    id: row.id,
    object: 'payment_method',
    allow_redisplay: 'unspecified',
    billing_details: { address: { city: null, country: null, line1: null, line2: null, postal_code: null, state: null }, email: null, name: null, phone: null },
    ...(bank
      ? {
          us_bank_account: {
            account_holder_type: 'individual',
            account_type: 'checking',
            bank_name: 'STRIPE TEST BANK',
            financial_connections_account: null,
            fingerprint: createHash('sha256').update(row.token).digest('base64url').slice(0, 16),
            last4: bank.last4,
            networks: { preferred: 'ach', supported: ['ach'] },
            routing_number: bank.routingNumber,
            status_details: {},
          },
        }
      : { card: cardDetails(row) }),
    created: Number(row.created),
    customer: row.customer,
    livemode: false,
    metadata: row.metadata,
    type: bank ? 'us_bank_account' : 'card',
  };
}

export function intentObject(row: IntentRow): StripeObject {
  return {
    id: row.id,
    object: 'payment_intent',
    amount: Number(row.amount),
    amount_capturable: 0,
    amount_details: { tip: {} },
    amount_received: Number(row.amount_received),
    application: null,
    application_fee_amount: null,
    automatic_payment_methods: row.automatic_payment_methods,
    canceled_at: num(row.canceled_at),
    cancellation_reason: row.cancellation_reason,
    capture_method: 'automatic',
    client_secret: row.client_secret,
    confirmation_method: 'automatic',
    created: Number(row.created),
    currency: row.currency,
    customer: row.customer,
    description: row.description,
    last_payment_error: row.last_payment_error,
    latest_charge: row.latest_charge,
    livemode: false,
    metadata: row.metadata,
    next_action: row.next_action,
    on_behalf_of: null,
    payment_method: row.payment_method,
    payment_method_options: { card: { installments: null, mandate_options: null, network: null, request_three_d_secure: 'automatic' } },
    payment_method_types: ['card'],
    processing: null,
    receipt_email: null,
    setup_future_usage: row.setup_future_usage,
    shipping: null,
    statement_descriptor: null,
    statement_descriptor_suffix: null,
    status: row.status,
    transfer_data: null,
    transfer_group: null,
  };
}

export function refundObject(row: RefundRow): StripeObject {
  return {
    id: row.id,
    object: 'refund',
    amount: Number(row.amount),
    balance_transaction: null,
    charge: row.charge,
    created: Number(row.created),
    currency: row.currency,
    destination_details: { type: 'card', card: { reference_status: 'pending', reference_type: 'acquirer_reference_number', type: 'refund' } },
    ...(row.failure_reason ? { failure_reason: row.failure_reason } : {}),
    metadata: row.metadata,
    payment_intent: row.payment_intent,
    reason: row.reason,
    receipt_number: null,
    source_transfer_reversal: null,
    status: row.status,
    transfer_reversal: null,
  };
}

/**
 * The intent's charge (one per confirmation attempt that reached the card network). Without `refunds`:
 * since API 2022-11-15 a charge no longer embeds them (list them with GET /v1/refunds?charge=, or expand).
 */
export function chargeObject(intent: IntentRow, pm: PaymentMethodRow | null): StripeObject {
  if (!intent.latest_charge) throw new Error(`intent ${intent.id} has no charge`);
  const succeeded = intent.status === 'succeeded';
  const error = succeeded ? null : (intent.last_payment_error as { code?: string; decline_code?: string; message?: string } | null);
  const amount = Number(intent.amount);
  const amountRefunded = Number(intent.amount_refunded);
  return {
    id: intent.latest_charge,
    object: 'charge',
    amount,
    amount_captured: succeeded ? amount : 0,
    amount_refunded: amountRefunded,
    balance_transaction: null,
    billing_details: { address: null, email: null, name: null, phone: null },
    captured: succeeded,
    created: Number(intent.created),
    currency: intent.currency,
    customer: intent.customer,
    description: intent.description,
    disputed: false,
    failure_code: error?.code ?? null,
    failure_message: error?.message ?? null,
    livemode: false,
    metadata: intent.metadata,
    outcome: succeeded
      ? { network_status: 'approved_by_network', reason: null, risk_level: 'normal', seller_message: 'Payment complete.', type: 'authorized' }
      : { network_status: 'declined_by_network', reason: error?.decline_code ?? null, risk_level: 'normal', seller_message: 'The bank did not return any further details with this decline.', type: 'issuer_declined' },
    paid: succeeded,
    payment_intent: intent.id,
    payment_method: intent.payment_method,
    payment_method_details: pm ? { type: 'card', card: cardDetails(pm) } : null,
    refunded: amountRefunded >= amount,
    status: succeeded ? 'succeeded' : 'failed',
  };
}

export function customerObject(row: CustomerRow): StripeObject {
  return {
    id: row.id,
    object: 'customer',
    address: null,
    balance: 0,
    created: Number(row.created),
    currency: null,
    default_source: null,
    delinquent: false,
    description: row.description,
    email: row.email,
    invoice_prefix: row.id.slice(4, 12).toUpperCase(),
    invoice_settings: { custom_fields: null, default_payment_method: null, footer: null, rendering_options: null },
    livemode: false,
    metadata: row.metadata,
    name: row.name,
    phone: null,
    preferred_locales: [],
    shipping: null,
    tax_exempt: 'none',
    test_clock: null,
  };
}

/** The secret is only part of the object in the answer to the creation. */
export function endpointObject(row: EndpointRow, withSecret = false): StripeObject {
  return {
    id: row.id,
    object: 'webhook_endpoint',
    api_version: row.api_version,
    application: null,
    created: Number(row.created),
    description: row.description,
    enabled_events: row.enabled_events,
    livemode: false,
    metadata: row.metadata,
    ...(withSecret ? { secret: row.secret } : {}),
    status: 'enabled',
    url: row.url,
  };
}

export function eventObject(type: string, object: StripeObject, idempotencyKey: string | null): StripeObject {
  return {
    id: newId('evt'),
    object: 'event',
    api_version: SIM_API_VERSION,
    created: nowSec(),
    data: { object },
    livemode: false,
    pending_webhooks: 1,
    request: { id: null, idempotency_key: idempotencyKey },
    type,
  };
}
