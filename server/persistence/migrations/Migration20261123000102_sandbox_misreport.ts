import { Migration } from '@mikro-orm/migrations';

/** The simulators' misreport switch (integrity tests): what a hostile provider reports instead of the real amount. */
export class Migration20261123000102_sandbox_misreport extends Migration {
  override async up(): Promise<void> {
    this.addSql(`
      CREATE TABLE sandbox_misreports (
        provider text PRIMARY KEY,
        amount jsonb NULL,
        currency text NULL,
        updated_at timestamptz NOT NULL DEFAULT now()
      );`);
  }

  override async down(): Promise<void> {
    this.addSql(`DROP TABLE sandbox_misreports;`);
  }
}
