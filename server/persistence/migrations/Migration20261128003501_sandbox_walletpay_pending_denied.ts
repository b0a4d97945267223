import { Migration } from '@mikro-orm/migrations';

/**
 * The walletpay simulator's approval whose capture is held for review and then denied (capture
 * DECLINED, event PAYMENT.CAPTURE.DENIED): one more funding value. A widened check: no table rewrite.
 */
export class Migration20261128003501_sandbox_walletpay_pending_denied extends Migration {
  override async up(): Promise<void> {
    this.addSql(`ALTER TABLE sandbox_walletpay_orders DROP CONSTRAINT sandbox_walletpay_orders_funding_check;`);
    this.addSql(`ALTER TABLE sandbox_walletpay_orders ADD CONSTRAINT sandbox_walletpay_orders_funding_check
      CHECK (funding IN ('ok', 'declined', 'pending', 'pending_denied', 'echeck', 'instrument_declined', 'refused'));`);
  }

  override async down(): Promise<void> {
    this.addSql(`UPDATE sandbox_walletpay_orders SET funding = 'pending' WHERE funding = 'pending_denied';`);
    this.addSql(`ALTER TABLE sandbox_walletpay_orders DROP CONSTRAINT sandbox_walletpay_orders_funding_check;`);
    this.addSql(`ALTER TABLE sandbox_walletpay_orders ADD CONSTRAINT sandbox_walletpay_orders_funding_check
      CHECK (funding IN ('ok', 'declined', 'pending', 'echeck', 'instrument_declined', 'refused'));`);
  }
}
