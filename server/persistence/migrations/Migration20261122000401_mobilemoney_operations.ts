import { Migration } from '@mikro-orm/migrations';

/** Transaction-status queries a merchant asked for (check-status), matched to their results. */
export class Migration20261122000401_mobilemoney_operations extends Migration {
  override async up(): Promise<void> {
    this.addSql(`
      CREATE TABLE mobilemoney_status_queries (
        id uuid PRIMARY KEY,
        merchant_id uuid NOT NULL REFERENCES merchants(id) ON DELETE CASCADE,
        payment_id uuid NULL REFERENCES payments(id) ON DELETE SET NULL,
        code text NOT NULL,
        originator_conversation_id text NULL,
        conversation_id text NULL,
        result_code text NULL,
        result jsonb NULL,
        created_at timestamptz NOT NULL DEFAULT now(),
        completed_at timestamptz NULL
      );`);
    this.addSql(`CREATE INDEX payments_checkout_request_idx ON payments ((provider_data->>'checkoutRequestId')) WHERE provider = 'mobilemoney';`);
    this.addSql(`CREATE INDEX payments_reference_idx ON payments (merchant_id, reference);`);
  }

  override async down(): Promise<void> {
    this.addSql('DROP INDEX payments_reference_idx; DROP INDEX payments_checkout_request_idx; DROP TABLE mobilemoney_status_queries;');
  }
}
