import { Migration } from '@mikro-orm/migrations';

/**
 * A token drawn by every lease of a delivery. An attempt's result is written only where the row still
 * carries the token of the lease it was made under: a worker whose lease expired mid-attempt (and was
 * taken over) can no longer overwrite the new holder's lease or result, nor add a scheduled attempt
 * that would make the delivery die early. Null while not leased.
 */
export class Migration20261127000601_delivery_lease_token extends Migration {
  override async up(): Promise<void> {
    this.addSql('ALTER TABLE webhook_deliveries ADD COLUMN lease_token uuid NULL;');
  }

  override async down(): Promise<void> {
    this.addSql('ALTER TABLE webhook_deliveries DROP COLUMN lease_token;');
  }
}
