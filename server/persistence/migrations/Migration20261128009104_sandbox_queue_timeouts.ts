import { Migration } from '@mikro-orm/migrations';

/**
 * The mobilemoney simulator's queue-timeouts control (sandbox/mobilemoney/results.ts): how many of the next
 * reversal requests get a queue-timeout notice and are carried out all the same, their result sent after
 * it (a timeout notice is not a final outcome). A constant default: no table rewrite.
 */
export class Migration20261128009104_sandbox_queue_timeouts extends Migration {
  override async up(): Promise<void> {
    this.addSql('ALTER TABLE sandbox_controls ADD COLUMN queue_timeouts integer NOT NULL DEFAULT 0;');
  }

  override async down(): Promise<void> {
    this.addSql('ALTER TABLE sandbox_controls DROP COLUMN queue_timeouts;');
  }
}
