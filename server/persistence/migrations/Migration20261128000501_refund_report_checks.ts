import { Migration } from '@mikro-orm/migrations';

/**
 * The refund sync's count of status reports asked about a refund's current provider request (its
 * provider_ref) with no outcome: after RESEND_AFTER_REPORT_CHECKS the request is sent again
 * (refund-sync.service.ts). In the row, so every worker process sees the same count. A constant
 * default: no table rewrite.
 */
export class Migration20261128000501_refund_report_checks extends Migration {
  override async up(): Promise<void> {
    this.addSql('ALTER TABLE refunds ADD COLUMN report_checks integer NOT NULL DEFAULT 0;');
  }

  override async down(): Promise<void> {
    this.addSql('ALTER TABLE refunds DROP COLUMN report_checks;');
  }
}
