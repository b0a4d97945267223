import { Migration } from '@mikro-orm/migrations';

/**
 * Payments, refunds, saved cards, the transition audit, the provider-callback inbox and the
 * transactional outbox (events + their webhook deliveries and delivery attempts).
 */
export class Migration20261122000002_payments extends Migration {
  override async up(): Promise<void> {
    this.addSql(`
      CREATE TABLE payments (
        id uuid PRIMARY KEY,
        merchant_id uuid NOT NULL REFERENCES merchants(id) ON DELETE CASCADE,
        provider text NOT NULL CHECK (provider IN ('cardpay', 'mobilemoney', 'walletpay')),
        status text NOT NULL CHECK (status IN ('pending', 'completed', 'failed', 'refunded', 'reversed')),
        amount_minor bigint NOT NULL CHECK (amount_minor > 0),
        currency char(3) NOT NULL,
        -- amount_minor in major units (exact numeric), for min_amount / max_amount filters across currencies
        amount numeric(20, 4) NOT NULL,
        amount_refunded_minor bigint NOT NULL DEFAULT 0 CHECK (amount_refunded_minor >= 0 AND amount_refunded_minor <= amount_minor),
        reference text NOT NULL UNIQUE,
        idempotency_key text NOT NULL UNIQUE,
        request_hash text NOT NULL,
        provider_ref text NULL,
        receipt_number text NULL,
        failure_reason text NULL,
        next_action jsonb NULL,
        provider_response jsonb NULL,
        provider_data jsonb NOT NULL DEFAULT '{}'::jsonb,
        sync_attempts int NOT NULL DEFAULT 0,
        next_sync_at timestamptz NULL,
        created_at timestamptz NOT NULL DEFAULT now(),
        updated_at timestamptz NOT NULL DEFAULT now()
      );`);
    this.addSql(`CREATE INDEX payments_merchant_created_idx ON payments (merchant_id, created_at DESC, id DESC);`);
    this.addSql(`CREATE INDEX payments_merchant_status_created_idx ON payments (merchant_id, status, created_at DESC);`);
    this.addSql(`CREATE INDEX payments_provider_ref_idx ON payments (provider, provider_ref);`);
    this.addSql(`CREATE INDEX payments_receipt_idx ON payments (merchant_id, receipt_number) WHERE receipt_number IS NOT NULL;`);
    this.addSql(`CREATE INDEX payments_sync_due_idx ON payments (next_sync_at) WHERE status = 'pending' AND next_sync_at IS NOT NULL;`);

    this.addSql(`
      CREATE TABLE payment_transitions (
        id bigserial PRIMARY KEY,
        payment_id uuid NOT NULL REFERENCES payments(id) ON DELETE CASCADE,
        from_status text NULL,
        to_status text NOT NULL,
        trigger text NOT NULL,
        accepted boolean NOT NULL,
        note text NULL,
        created_at timestamptz NOT NULL DEFAULT now()
      );`);
    this.addSql(`CREATE INDEX payment_transitions_payment_idx ON payment_transitions (payment_id, id);`);

    this.addSql(`
      CREATE TABLE refunds (
        id uuid PRIMARY KEY,
        payment_id uuid NOT NULL REFERENCES payments(id) ON DELETE CASCADE,
        merchant_id uuid NOT NULL REFERENCES merchants(id) ON DELETE CASCADE,
        status text NOT NULL CHECK (status IN ('pending', 'completed', 'failed')),
        amount_minor bigint NOT NULL CHECK (amount_minor > 0),
        currency char(3) NOT NULL,
        provider_ref text NULL,
        failure_reason text NULL,
        provider_response jsonb NULL,
        created_at timestamptz NOT NULL DEFAULT now(),
        updated_at timestamptz NOT NULL DEFAULT now()
      );`);
    this.addSql(`CREATE INDEX refunds_payment_idx ON refunds (payment_id, created_at);`);
    this.addSql(`CREATE INDEX refunds_provider_ref_idx ON refunds (provider_ref) WHERE provider_ref IS NOT NULL;`);

    this.addSql(`
      CREATE TABLE saved_cards (
        id uuid PRIMARY KEY,
        merchant_id uuid NOT NULL REFERENCES merchants(id) ON DELETE CASCADE,
        provider text NOT NULL DEFAULT 'cardpay',
        payment_method_token text NOT NULL,
        customer_ref text NOT NULL,
        brand text NOT NULL,
        last4 text NOT NULL,
        exp_month int NOT NULL,
        exp_year int NOT NULL,
        is_default boolean NOT NULL DEFAULT false,
        active boolean NOT NULL DEFAULT true,
        created_at timestamptz NOT NULL DEFAULT now(),
        deleted_at timestamptz NULL
      );`);
    this.addSql(`CREATE INDEX saved_cards_merchant_idx ON saved_cards (merchant_id, created_at) WHERE active;`);

    this.addSql(`
      CREATE TABLE provider_events (
        provider text NOT NULL,
        event_id text NOT NULL,
        payment_id uuid NULL,
        outcome text NOT NULL,
        received_at timestamptz NOT NULL DEFAULT now(),
        PRIMARY KEY (provider, event_id)
      );`);

    this.addSql(`
      CREATE TABLE events (
        id uuid PRIMARY KEY,
        merchant_id uuid NOT NULL REFERENCES merchants(id) ON DELETE CASCADE,
        payment_id uuid NULL,
        type text NOT NULL,
        payload jsonb NOT NULL,
        body text NOT NULL,
        created_at timestamptz NOT NULL DEFAULT now()
      );`);
    this.addSql(`CREATE INDEX events_payment_idx ON events (payment_id, created_at);`);

    this.addSql(`
      CREATE TABLE webhook_deliveries (
        id uuid PRIMARY KEY,
        event_id uuid NOT NULL REFERENCES events(id) ON DELETE CASCADE,
        merchant_id uuid NOT NULL REFERENCES merchants(id) ON DELETE CASCADE,
        payment_id uuid NULL,
        event_type text NOT NULL,
        url text NOT NULL,
        status text NOT NULL CHECK (status IN ('pending', 'delivered', 'retrying', 'dead')),
        attempts int NOT NULL DEFAULT 0,
        last_response_status int NULL,
        last_error text NULL,
        next_attempt_at timestamptz NULL,
        delivered_at timestamptz NULL,
        lease_until timestamptz NULL,
        created_at timestamptz NOT NULL DEFAULT now(),
        updated_at timestamptz NOT NULL DEFAULT now()
      );`);
    this.addSql(`CREATE INDEX webhook_deliveries_due_idx ON webhook_deliveries (next_attempt_at) WHERE status IN ('pending', 'retrying');`);
    this.addSql(`CREATE INDEX webhook_deliveries_merchant_idx ON webhook_deliveries (merchant_id, created_at DESC);`);

    this.addSql(`
      CREATE TABLE delivery_attempts (
        id bigserial PRIMARY KEY,
        delivery_id uuid NOT NULL REFERENCES webhook_deliveries(id) ON DELETE CASCADE,
        attempt_number int NOT NULL,
        trigger text NOT NULL CHECK (trigger IN ('scheduled', 'manual')),
        response_status int NULL,
        error text NULL,
        duration_ms int NOT NULL,
        created_at timestamptz NOT NULL DEFAULT now()
      );`);
    this.addSql(`CREATE INDEX delivery_attempts_delivery_idx ON delivery_attempts (delivery_id, attempt_number);`);

    // Simulator switches (outage modes), shared by every process.
    this.addSql(`
      CREATE TABLE sandbox_controls (
        provider text PRIMARY KEY,
        mode text NOT NULL CHECK (mode IN ('ok', 'error', 'hang')),
        updated_at timestamptz NOT NULL DEFAULT now()
      );`);
  }

  override async down(): Promise<void> {
    this.addSql(`DROP TABLE sandbox_controls, delivery_attempts, webhook_deliveries, events, provider_events, saved_cards, refunds, payment_transitions, payments;`);
  }
}
