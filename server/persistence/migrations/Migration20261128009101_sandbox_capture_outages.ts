import { Migration } from '@mikro-orm/migrations';

/**
 * The simulators' capture-only outage modes (sandbox/controls.ts): 'captures_error' and 'captures_hang'
 * fail a provider's captures alone, its other requests answered — so a capture whose read of the order
 * before it succeeds can still be failed. The table has a row per provider: the check is cheap.
 */
export class Migration20261128009101_sandbox_capture_outages extends Migration {
  override async up(): Promise<void> {
    this.addSql(`ALTER TABLE sandbox_controls DROP CONSTRAINT sandbox_controls_mode_check,
      ADD CONSTRAINT sandbox_controls_mode_check CHECK (mode IN ('ok', 'error', 'hang', 'captures_error', 'captures_hang'));`);
  }

  override async down(): Promise<void> {
    // The earlier release has no capture-only outage: a simulator in one is back to normal.
    this.addSql(`UPDATE sandbox_controls SET mode = 'ok', updated_at = now() WHERE mode IN ('captures_error', 'captures_hang');`);
    this.addSql(`ALTER TABLE sandbox_controls DROP CONSTRAINT sandbox_controls_mode_check,
      ADD CONSTRAINT sandbox_controls_mode_check CHECK (mode IN ('ok', 'error', 'hang'));`);
  }
}
