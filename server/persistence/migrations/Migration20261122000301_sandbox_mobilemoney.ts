import { Migration } from '@mikro-orm/migrations';

/**
 * mobilemoney: the adapter's shared OAuth token cache (the operator invalidates a consumer key's
 * previous token whenever a new one is issued, so every process must use the same one), and the
 * M-Pesa Daraja simulator's state (tables prefixed `sandbox_mobilemoney_`).
 */
export class Migration20261122000301_sandbox_mobilemoney extends Migration {
  override async up(): Promise<void> {
    // One row per (base URL, consumer key). The token is AES-256-GCM encrypted with a key derived
    // from the consumer secret, so the table alone is useless to a reader.
    this.addSql(`
      CREATE TABLE mobilemoney_tokens (
        cache_key text PRIMARY KEY,
        token_enc text NOT NULL,
        expires_at timestamptz NOT NULL,
        updated_at timestamptz NOT NULL DEFAULT now()
      );`);

    this.addSql(`
      CREATE TABLE sandbox_mobilemoney_tokens (
        access_token text PRIMARY KEY,
        consumer_key text NOT NULL,
        expires_at timestamptz NOT NULL,
        revoked_at timestamptz NULL,
        created_at timestamptz NOT NULL DEFAULT now()
      );`);
    this.addSql(`CREATE INDEX sandbox_mobilemoney_tokens_key_idx ON sandbox_mobilemoney_tokens (consumer_key) WHERE revoked_at IS NULL;`);

    // Every STK push the simulator accepted, with its outcome decided at push time (by test phone).
    this.addSql(`
      CREATE TABLE sandbox_mobilemoney_stk_requests (
        checkout_request_id text PRIMARY KEY,
        merchant_request_id text NOT NULL,
        consumer_key text NOT NULL,
        shortcode text NOT NULL,
        transaction_type text NOT NULL,
        party_a text NOT NULL,
        party_b text NOT NULL,
        phone text NOT NULL,
        amount bigint NOT NULL,
        account_reference text NOT NULL,
        transaction_desc text NULL,
        callback_url text NOT NULL,
        result_code int NOT NULL,
        result_desc text NOT NULL,
        receipt_number text NULL UNIQUE,
        sends_callback boolean NOT NULL,
        completes_at timestamptz NOT NULL,
        created_at timestamptz NOT NULL DEFAULT now()
      );`);
    this.addSql(`CREATE INDEX sandbox_mobilemoney_stk_completed_idx ON sandbox_mobilemoney_stk_requests (shortcode, completes_at) WHERE receipt_number IS NOT NULL;`);

    this.addSql(`
      CREATE TABLE sandbox_mobilemoney_reversals (
        conversation_id text PRIMARY KEY,
        originator_conversation_id text NOT NULL,
        transaction_id text NOT NULL,
        reversal_receipt text NULL,
        amount bigint NULL,
        result_code text NOT NULL,
        created_at timestamptz NOT NULL DEFAULT now()
      );`);
    // A receipt is reversed at most once, whatever the concurrency.
    this.addSql(`CREATE UNIQUE INDEX sandbox_mobilemoney_reversals_once ON sandbox_mobilemoney_reversals (transaction_id) WHERE result_code = '0';`);

    this.addSql(`
      CREATE TABLE sandbox_mobilemoney_pull_registrations (
        shortcode text PRIMARY KEY,
        nominated_number text NOT NULL,
        callback_url text NOT NULL,
        response_ref_id text NOT NULL,
        created_at timestamptz NOT NULL DEFAULT now()
      );`);
  }

  override async down(): Promise<void> {
    this.addSql(`DROP TABLE sandbox_mobilemoney_pull_registrations, sandbox_mobilemoney_reversals, sandbox_mobilemoney_stk_requests, sandbox_mobilemoney_tokens, mobilemoney_tokens;`);
  }
}
