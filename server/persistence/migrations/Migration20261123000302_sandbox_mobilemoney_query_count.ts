import { Migration } from '@mikro-orm/migrations';

/** The simulator counts the STK queries each push received (tests prove when the service asks and when it does not). */
export class Migration20261123000302_sandbox_mobilemoney_query_count extends Migration {
  override async up(): Promise<void> {
    this.addSql(`ALTER TABLE sandbox_mobilemoney_stk_requests ADD COLUMN query_count int NOT NULL DEFAULT 0;`);
  }

  override async down(): Promise<void> {
    this.addSql(`ALTER TABLE sandbox_mobilemoney_stk_requests DROP COLUMN query_count;`);
  }
}
