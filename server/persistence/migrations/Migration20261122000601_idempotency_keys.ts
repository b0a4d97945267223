import { Migration } from '@mikro-orm/migrations';

/**
 * Idempotency keys as their own rows (Brandur Leach, "Implementing Stripe-like Idempotency Keys in
 * Postgres"): a request claims its key with one INSERT … ON CONFLICT, holds a lease (`locked_until`)
 * instead of a database lock while the provider is called, and records where a retry resumes
 * (`recovery_point`, `resource_id`). One row per (scope, key): payment creation, capture, refunds and
 * saved cards each have their own key space.
 */
export class Migration20261122000601_idempotency_keys extends Migration {
  override async up(): Promise<void> {
    this.addSql(`
      CREATE TABLE idempotency_keys (
        id uuid PRIMARY KEY DEFAULT gen_random_uuid(),
        scope text NOT NULL,
        key text NOT NULL,
        merchant_id uuid NOT NULL REFERENCES merchants(id),
        request_hash text NOT NULL,
        recovery_point text NOT NULL CHECK (recovery_point IN ('provider_call', 'finished')),
        resource_id uuid NOT NULL,
        lease_token uuid,
        locked_until timestamptz,
        answer jsonb,
        created_at timestamptz NOT NULL DEFAULT now(),
        updated_at timestamptz NOT NULL DEFAULT now(),
        UNIQUE (scope, key)
      );`);
    // Payments created before this table: their keys are finished claims.
    this.addSql(`
      INSERT INTO idempotency_keys (scope, key, merchant_id, request_hash, recovery_point, resource_id, answer, created_at)
      SELECT 'payment.create', idempotency_key, merchant_id, request_hash, 'finished', id, '{"status":201}'::jsonb, created_at
      FROM payments;`);
  }

  override async down(): Promise<void> {
    this.addSql('DROP TABLE idempotency_keys;');
  }
}
