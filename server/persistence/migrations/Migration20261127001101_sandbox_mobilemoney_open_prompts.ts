import { Migration } from '@mikro-orm/migrations';

/**
 * The mobilemoney simulator refuses a push to a phone whose prompt is still open (Daraja's "Unable to lock
 * subscriber"): it looks up the phone's latest push on every push, so by phone and completion time.
 */
export class Migration20261127001101_sandbox_mobilemoney_open_prompts extends Migration {
  override async up(): Promise<void> {
    this.addSql(`CREATE INDEX IF NOT EXISTS sandbox_mobilemoney_stk_phone_idx ON sandbox_mobilemoney_stk_requests (phone, completes_at);`);
  }

  override async down(): Promise<void> {
    this.addSql(`DROP INDEX IF EXISTS sandbox_mobilemoney_stk_phone_idx;`);
  }
}
