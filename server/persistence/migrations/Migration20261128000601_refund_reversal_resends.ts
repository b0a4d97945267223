import { Migration } from '@mikro-orm/migrations';

/**
 * What the refund sync keeps about a mobilemoney reversal whose result was lost (refund-sync.service.ts),
 * in the refund's row so every worker process sees it: `report_checks`, the status reports asked about
 * the current request (provider_ref) without an outcome; `reversal_resends`, the repeats sent; and
 * `earlier_provider_refs`, the references of the refund's earlier requests, whose results still count
 * (resolve.ts). Constant defaults: no table rewrite. The index holds only refunds that were resent.
 */
export class Migration20261128000601_refund_reversal_resends extends Migration {
  override async up(): Promise<void> {
    this.addSql(`ALTER TABLE refunds ADD COLUMN report_checks integer NOT NULL DEFAULT 0,
      ADD COLUMN reversal_resends integer NOT NULL DEFAULT 0,
      ADD COLUMN earlier_provider_refs text[] NOT NULL DEFAULT '{}';`);
    this.addSql(`CREATE INDEX refunds_earlier_provider_refs_idx ON refunds USING gin (earlier_provider_refs) WHERE cardinality(earlier_provider_refs) > 0;`);
  }

  override async down(): Promise<void> {
    this.addSql(`DROP INDEX IF EXISTS refunds_earlier_provider_refs_idx;`);
    this.addSql(`ALTER TABLE refunds DROP COLUMN report_checks, DROP COLUMN reversal_resends, DROP COLUMN earlier_provider_refs;`);
  }
}
