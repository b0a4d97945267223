import { Migration } from '@mikro-orm/migrations';

/**
 * How many times in a row a delivery was given back unsent because its merchant's signing secret could not
 * be opened (releaseUnattempted): each give-back waits twice as long as the one before, up to an hour, so a
 * backlog sealed with a key no process has is not claimed again every 30 s for ever. Reset by an attempt.
 * A constant default: no table rewrite.
 */
export class Migration20261128000701_delivery_unsent_releases extends Migration {
  override async up(): Promise<void> {
    this.addSql('ALTER TABLE webhook_deliveries ADD COLUMN unsent_releases integer NOT NULL DEFAULT 0;');
  }

  override async down(): Promise<void> {
    this.addSql('ALTER TABLE webhook_deliveries DROP COLUMN unsent_releases;');
  }
}
