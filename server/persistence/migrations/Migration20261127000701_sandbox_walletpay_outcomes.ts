import { Migration } from '@mikro-orm/migrations';

/**
 * The walletpay simulator's further outcomes: approvals whose refunds go pending and then fail (an
 * eCheck), or whose capture is refused INSTRUMENT_DECLINED (the buyer must choose another funding
 * source) or TRANSACTION_REFUSED (for good); the refused capture's PayPal-Request-Id, whose repeat PayPal answers with the same refusal;
 * and a refund's status reason. Nullable columns and a widened check: no table rewrite.
 */
export class Migration20261127000701_sandbox_walletpay_outcomes extends Migration {
  override async up(): Promise<void> {
    this.addSql(`ALTER TABLE sandbox_walletpay_orders DROP CONSTRAINT sandbox_walletpay_orders_funding_check;`);
    this.addSql(`ALTER TABLE sandbox_walletpay_orders ADD CONSTRAINT sandbox_walletpay_orders_funding_check
      CHECK (funding IN ('ok', 'declined', 'pending', 'echeck', 'instrument_declined', 'refused'));`);
    this.addSql(`ALTER TABLE sandbox_walletpay_orders ADD COLUMN refused_capture_request_id text NULL;`);
    this.addSql(`ALTER TABLE sandbox_walletpay_refunds ADD COLUMN status_reason text NULL;`);
  }

  override async down(): Promise<void> {
    this.addSql(`ALTER TABLE sandbox_walletpay_refunds DROP COLUMN status_reason;`);
    this.addSql(`ALTER TABLE sandbox_walletpay_orders DROP COLUMN refused_capture_request_id;`);
    this.addSql(`UPDATE sandbox_walletpay_orders SET funding = 'ok' WHERE funding IN ('echeck', 'instrument_declined', 'refused');`);
    this.addSql(`ALTER TABLE sandbox_walletpay_orders DROP CONSTRAINT sandbox_walletpay_orders_funding_check;`);
    this.addSql(`ALTER TABLE sandbox_walletpay_orders ADD CONSTRAINT sandbox_walletpay_orders_funding_check CHECK (funding IN ('ok', 'declined', 'pending'));`);
  }
}
