import { Migration } from '@mikro-orm/migrations';

/**
 * The walletpay simulator's order lifetime as PayPal's: 3 h from creation to send the buyer to approve,
 * then 3 h from that redirect to approve and capture. `redirected_at` is when the approval page was first
 * opened. Orders approved before this migration count from their last change (when they were approved).
 */
export class Migration20261129043001_sandbox_walletpay_redirected_at extends Migration {
  override async up(): Promise<void> {
    this.addSql('ALTER TABLE sandbox_walletpay_orders ADD COLUMN redirected_at timestamptz NULL;');
    this.addSql(`UPDATE sandbox_walletpay_orders SET redirected_at = updated_at WHERE status = 'APPROVED';`);
  }

  override async down(): Promise<void> {
    this.addSql('ALTER TABLE sandbox_walletpay_orders DROP COLUMN redirected_at;');
  }
}
