import { Migration } from '@mikro-orm/migrations';

/**
 * The mobilemoney simulator's lose-answers control (sandbox/mobilemoney/results.ts): how many of the next
 * reversal and transaction-status requests are carried out with their acknowledgement lost, so a test
 * can make a request's answer never arrive. A constant default: no table rewrite.
 */
export class Migration20261128000603_sandbox_lost_answers extends Migration {
  override async up(): Promise<void> {
    this.addSql('ALTER TABLE sandbox_controls ADD COLUMN lost_answers integer NOT NULL DEFAULT 0;');
  }

  override async down(): Promise<void> {
    this.addSql('ALTER TABLE sandbox_controls DROP COLUMN lost_answers;');
  }
}
