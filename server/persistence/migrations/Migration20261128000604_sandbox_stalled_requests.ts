import { Migration } from '@mikro-orm/migrations';

/**
 * The mobilemoney simulator's stall-requests control (sandbox/mobilemoney/stalled-requests.ts): how many
 * of the next reversal requests are left unanswered until refuse-stalled turns them away, so a test can
 * make one request slow while another is answered. A constant default: no table rewrite.
 */
export class Migration20261128000604_sandbox_stalled_requests extends Migration {
  override async up(): Promise<void> {
    this.addSql('ALTER TABLE sandbox_controls ADD COLUMN stalled_requests integer NOT NULL DEFAULT 0;');
  }

  override async down(): Promise<void> {
    this.addSql('ALTER TABLE sandbox_controls DROP COLUMN stalled_requests;');
  }
}
