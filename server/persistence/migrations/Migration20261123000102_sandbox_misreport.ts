import { Migration } from '@mikro-orm/migrations';

/** The simulators' misreport switch (integrity tests): what a hostile provider reports instead of the real amount, next to its outage mode. */
export class Migration20261123000102_sandbox_misreport extends Migration {
  override async up(): Promise<void> {
    this.addSql(`ALTER TABLE sandbox_controls ADD COLUMN misreport_amount jsonb NULL, ADD COLUMN misreport_currency text NULL;`);
  }

  override async down(): Promise<void> {
    this.addSql(`ALTER TABLE sandbox_controls DROP COLUMN misreport_amount, DROP COLUMN misreport_currency;`);
  }
}
