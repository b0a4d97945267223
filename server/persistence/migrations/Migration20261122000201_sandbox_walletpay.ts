import { Migration } from '@mikro-orm/migrations';

/**
 * State of the walletpay simulator (PayPal Orders v2 wire protocol): OAuth tokens, orders, captures,
 * refunds, webhook subscriptions, the events it emitted and each signed transmission of them, and the
 * RSA key pair that signs transmissions (generated once, kept here so every process signs alike).
 */
export class Migration20261122000201_sandbox_walletpay extends Migration {
  override async up(): Promise<void> {
    this.addSql(`
      CREATE TABLE sandbox_walletpay_keys (
        id int PRIMARY KEY CHECK (id = 1),
        cert_id text NOT NULL,
        private_key_pem text NOT NULL,
        public_key_pem text NOT NULL,
        created_at timestamptz NOT NULL DEFAULT now()
      );`);
    this.addSql(`
      CREATE TABLE sandbox_walletpay_tokens (
        access_token text PRIMARY KEY,
        client_id text NOT NULL,
        expires_at timestamptz NOT NULL,
        created_at timestamptz NOT NULL DEFAULT now()
      );`);
    this.addSql(`CREATE INDEX sandbox_walletpay_tokens_client_idx ON sandbox_walletpay_tokens (client_id);`);
    this.addSql(`
      CREATE TABLE sandbox_walletpay_orders (
        id text PRIMARY KEY,
        client_id text NOT NULL,
        request_id text NULL,
        intent text NOT NULL,
        status text NOT NULL CHECK (status IN ('CREATED', 'SAVED', 'APPROVED', 'VOIDED', 'COMPLETED', 'PAYER_ACTION_REQUIRED')),
        purchase_unit jsonb NOT NULL,
        amount_minor bigint NOT NULL CHECK (amount_minor > 0),
        currency char(3) NOT NULL,
        experience jsonb NOT NULL DEFAULT '{}'::jsonb,
        uses_payment_source boolean NOT NULL,
        payer_id text NULL,
        funding text NOT NULL DEFAULT 'ok' CHECK (funding IN ('ok', 'declined', 'pending')),
        capture_request_id text NULL,
        created_at timestamptz NOT NULL DEFAULT now(),
        updated_at timestamptz NOT NULL DEFAULT now()
      );`);
    this.addSql(`CREATE UNIQUE INDEX sandbox_walletpay_orders_request_idx ON sandbox_walletpay_orders (client_id, request_id) WHERE request_id IS NOT NULL;`);
    this.addSql(`
      CREATE TABLE sandbox_walletpay_captures (
        id text PRIMARY KEY,
        order_id text NOT NULL REFERENCES sandbox_walletpay_orders(id) ON DELETE CASCADE,
        client_id text NOT NULL,
        status text NOT NULL CHECK (status IN ('COMPLETED', 'DECLINED', 'PENDING', 'PARTIALLY_REFUNDED', 'REFUNDED', 'FAILED')),
        status_reason text NULL,
        amount_minor bigint NOT NULL,
        currency char(3) NOT NULL,
        refunded_minor bigint NOT NULL DEFAULT 0 CHECK (refunded_minor >= 0 AND refunded_minor <= amount_minor),
        custom_id text NULL,
        invoice_id text NULL,
        created_at timestamptz NOT NULL DEFAULT now(),
        updated_at timestamptz NOT NULL DEFAULT now()
      );`);
    this.addSql(`CREATE INDEX sandbox_walletpay_captures_order_idx ON sandbox_walletpay_captures (order_id);`);
    this.addSql(`
      CREATE TABLE sandbox_walletpay_refunds (
        id text PRIMARY KEY,
        capture_id text NOT NULL REFERENCES sandbox_walletpay_captures(id) ON DELETE CASCADE,
        client_id text NOT NULL,
        request_id text NULL,
        status text NOT NULL CHECK (status IN ('COMPLETED', 'PENDING', 'FAILED', 'CANCELLED')),
        amount_minor bigint NOT NULL CHECK (amount_minor > 0),
        currency char(3) NOT NULL,
        invoice_id text NULL,
        custom_id text NULL,
        note_to_payer text NULL,
        created_at timestamptz NOT NULL DEFAULT now(),
        updated_at timestamptz NOT NULL DEFAULT now()
      );`);
    this.addSql(`CREATE INDEX sandbox_walletpay_refunds_capture_idx ON sandbox_walletpay_refunds (capture_id, created_at);`);
    this.addSql(`CREATE UNIQUE INDEX sandbox_walletpay_refunds_request_idx ON sandbox_walletpay_refunds (client_id, request_id) WHERE request_id IS NOT NULL;`);
    this.addSql(`
      CREATE TABLE sandbox_walletpay_webhooks (
        id text PRIMARY KEY,
        client_id text NOT NULL,
        url text NOT NULL,
        event_types jsonb NOT NULL,
        created_at timestamptz NOT NULL DEFAULT now(),
        UNIQUE (client_id, url)
      );`);
    this.addSql(`
      CREATE TABLE sandbox_walletpay_events (
        id text PRIMARY KEY,
        client_id text NOT NULL,
        event_type text NOT NULL,
        body jsonb NOT NULL,
        created_at timestamptz NOT NULL DEFAULT now()
      );`);
    this.addSql(`
      CREATE TABLE sandbox_walletpay_transmissions (
        id uuid PRIMARY KEY,
        event_id text NOT NULL REFERENCES sandbox_walletpay_events(id) ON DELETE CASCADE,
        webhook_id text NOT NULL,
        url text NOT NULL,
        raw_body text NOT NULL,
        transmission_time text NULL,
        signature text NULL,
        status text NOT NULL DEFAULT 'pending' CHECK (status IN ('pending', 'delivered', 'failed')),
        attempts int NOT NULL DEFAULT 0,
        last_response_status int NULL,
        last_error text NULL,
        delivered_at timestamptz NULL,
        created_at timestamptz NOT NULL DEFAULT now()
      );`);
  }

  override async down(): Promise<void> {
    this.addSql(`DROP TABLE sandbox_walletpay_transmissions, sandbox_walletpay_events, sandbox_walletpay_webhooks, sandbox_walletpay_refunds, sandbox_walletpay_captures, sandbox_walletpay_orders, sandbox_walletpay_tokens, sandbox_walletpay_keys;`);
  }
}
