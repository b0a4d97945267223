import { Migration } from '@mikro-orm/migrations';

/**
 * The mobilemoney simulator's held results (the hold-results and release-results controls,
 * sandbox/mobilemoney/held-results.ts): how many of the next results to hold, and the held ones until
 * they are released, so a test can make a result arrive late. A constant default: no table rewrite.
 */
export class Migration20261128000602_sandbox_held_results extends Migration {
  override async up(): Promise<void> {
    this.addSql('ALTER TABLE sandbox_controls ADD COLUMN held_results integer NOT NULL DEFAULT 0;');
    this.addSql(`CREATE TABLE sandbox_held_results (
      id bigserial PRIMARY KEY,
      provider text NOT NULL,
      job jsonb NOT NULL,
      held_at timestamptz NOT NULL DEFAULT now()
    );`);
  }

  override async down(): Promise<void> {
    this.addSql('DROP TABLE sandbox_held_results;');
    this.addSql('ALTER TABLE sandbox_controls DROP COLUMN held_results;');
  }
}
