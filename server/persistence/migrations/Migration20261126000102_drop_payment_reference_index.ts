import { Migration } from '@mikro-orm/migrations';

/**
 * payments_reference_idx (merchant_id, reference) duplicates the unique index on reference: a reference
 * is unique across merchants, so a lookup by merchant and reference finds its one row through
 * payments_reference_key and checks the merchant on it. No list filter reads reference. Every payment
 * insert and every status change (never a HOT update) wrote an entry to both.
 */
export class Migration20261126000102_drop_payment_reference_index extends Migration {
  override async up(): Promise<void> {
    this.addSql(`DROP INDEX payments_reference_idx;`);
  }

  override async down(): Promise<void> {
    this.addSql(`CREATE INDEX payments_reference_idx ON payments (merchant_id, reference);`);
  }
}
