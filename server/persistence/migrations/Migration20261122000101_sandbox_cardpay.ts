import { Migration } from '@mikro-orm/migrations';

/**
 * State of the built-in cardpay simulator (Stripe PaymentIntents protocol). `account` is the SHA-256 of
 * the secret key that made an object: each key is its own tenant, and no key is stored.
 */
export class Migration20261122000101_sandbox_cardpay extends Migration {
  override async up(): Promise<void> {
    this.addSql(`
      CREATE TABLE sandbox_cardpay_customers (
        id text PRIMARY KEY,
        account text NOT NULL,
        email text NULL,
        name text NULL,
        description text NULL,
        metadata jsonb NOT NULL DEFAULT '{}'::jsonb,
        created bigint NOT NULL
      );`);
    this.addSql(`
      CREATE TABLE sandbox_cardpay_payment_methods (
        id text PRIMARY KEY,
        account text NOT NULL,
        token text NOT NULL,
        customer text NULL,
        detached boolean NOT NULL DEFAULT false,
        metadata jsonb NOT NULL DEFAULT '{}'::jsonb,
        created bigint NOT NULL
      );`);
    this.addSql(`CREATE INDEX sandbox_cardpay_pm_customer_idx ON sandbox_cardpay_payment_methods (customer) WHERE customer IS NOT NULL;`);
    this.addSql(`
      CREATE TABLE sandbox_cardpay_intents (
        id text PRIMARY KEY,
        account text NOT NULL,
        amount bigint NOT NULL CHECK (amount > 0),
        currency text NOT NULL,
        status text NOT NULL,
        payment_method text NULL,
        customer text NULL,
        description text NULL,
        return_url text NULL,
        off_session boolean NOT NULL DEFAULT false,
        automatic_payment_methods jsonb NULL,
        metadata jsonb NOT NULL DEFAULT '{}'::jsonb,
        next_action jsonb NULL,
        last_payment_error jsonb NULL,
        latest_charge text NULL,
        amount_received bigint NOT NULL DEFAULT 0,
        amount_refunded bigint NOT NULL DEFAULT 0 CHECK (amount_refunded >= 0 AND amount_refunded <= amount),
        client_secret text NOT NULL,
        cancellation_reason text NULL,
        canceled_at bigint NULL,
        created bigint NOT NULL,
        updated_at timestamptz NOT NULL DEFAULT now()
      );`);
    this.addSql(`CREATE INDEX sandbox_cardpay_intents_account_idx ON sandbox_cardpay_intents (account, created DESC);`);
    this.addSql(`CREATE INDEX sandbox_cardpay_intents_charge_idx ON sandbox_cardpay_intents (latest_charge) WHERE latest_charge IS NOT NULL;`);
    this.addSql(`
      CREATE TABLE sandbox_cardpay_refunds (
        id text PRIMARY KEY,
        account text NOT NULL,
        payment_intent text NOT NULL REFERENCES sandbox_cardpay_intents(id) ON DELETE CASCADE,
        charge text NOT NULL,
        amount bigint NOT NULL CHECK (amount > 0),
        currency text NOT NULL,
        status text NOT NULL,
        reason text NULL,
        metadata jsonb NOT NULL DEFAULT '{}'::jsonb,
        created bigint NOT NULL
      );`);
    this.addSql(`CREATE INDEX sandbox_cardpay_refunds_intent_idx ON sandbox_cardpay_refunds (payment_intent, created);`);
    this.addSql(`
      CREATE TABLE sandbox_cardpay_webhook_endpoints (
        id text PRIMARY KEY,
        account text NOT NULL,
        url text NOT NULL,
        secret text NOT NULL,
        enabled_events text[] NOT NULL,
        description text NULL,
        metadata jsonb NOT NULL DEFAULT '{}'::jsonb,
        created bigint NOT NULL
      );`);
    this.addSql(`CREATE INDEX sandbox_cardpay_endpoints_account_idx ON sandbox_cardpay_webhook_endpoints (account);`);
    // Stripe-style idempotency: the first request with a key stores its response; the rest replay it.
    this.addSql(`
      CREATE TABLE sandbox_cardpay_idempotency (
        account text NOT NULL,
        idempotency_key text NOT NULL,
        request_hash text NOT NULL,
        response_status int NULL,
        response_body jsonb NULL,
        created_at timestamptz NOT NULL DEFAULT now(),
        PRIMARY KEY (account, idempotency_key)
      );`);
  }

  override async down(): Promise<void> {
    this.addSql(`DROP TABLE sandbox_cardpay_idempotency, sandbox_cardpay_webhook_endpoints, sandbox_cardpay_refunds, sandbox_cardpay_intents, sandbox_cardpay_payment_methods, sandbox_cardpay_customers;`);
  }
}
