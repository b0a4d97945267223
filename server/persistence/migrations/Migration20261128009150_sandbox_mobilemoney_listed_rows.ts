import { Migration } from '@mikro-orm/migrations';

/**
 * The mobilemoney simulator's pull-rows control (sandbox/mobilemoney/listed-rows.ts): the rows a test has
 * the pull of a shortcode list, page after page. In the database like every simulator state, so every
 * process serving the simulator lists the same rows.
 */
export class Migration20261128009150_sandbox_mobilemoney_listed_rows extends Migration {
  override async up(): Promise<void> {
    this.addSql('CREATE TABLE sandbox_mobilemoney_listed_rows (shortcode text PRIMARY KEY, pages jsonb NOT NULL);');
  }

  override async down(): Promise<void> {
    this.addSql('DROP TABLE sandbox_mobilemoney_listed_rows;');
  }
}
