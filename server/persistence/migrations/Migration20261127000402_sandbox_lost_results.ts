import { Migration } from '@mikro-orm/migrations';

/** The mobilemoney simulator's lost-results switch (the lose-results control, sandbox/controls.ts mountLossCountdown). A constant default: no table rewrite. */
export class Migration20261127000402_sandbox_lost_results extends Migration {
  override async up(): Promise<void> {
    this.addSql('ALTER TABLE sandbox_controls ADD COLUMN lost_results integer NOT NULL DEFAULT 0;');
  }

  override async down(): Promise<void> {
    this.addSql('ALTER TABLE sandbox_controls DROP COLUMN lost_results;');
  }
}
