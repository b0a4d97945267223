import { Migration } from '@mikro-orm/migrations';
import { dropInvalidIndexSql } from './Migration20261128002201_dead_deliveries_index_without_tests.js';

/**
 * One payment per provider reference: an inbound notification, a status read or a reconciliation finds
 * its payment by (provider, provider_ref), and with two rows of one reference a provider's message could
 * settle either. Nothing the service does gives two payments one reference; the unique index makes that
 * a failed write, never a silent second binding. Partial: a payment gets its reference only from its
 * provider's answer, so the reservation (no reference yet) writes no entry of it.
 *
 * A database where two payments already share a reference is refused with the count, before anything
 * changes (the operator looks at them first: `SELECT provider, provider_ref, array_agg(id) FROM payments
 * WHERE provider_ref IS NOT NULL GROUP BY 1, 2 HAVING count(*) > 1`). The index may be built by hand first
 * (`CREATE UNIQUE INDEX CONCURRENTLY payments_provider_ref_new_idx …`, README "Upgrading"); a failed hand
 * build's INVALID index, or one built without UNIQUE, is dropped and built again.
 */
export class Migration20261128009140_payments_provider_ref_unique extends Migration {
  override async up(): Promise<void> {
    this.addSql(`DO $$
      DECLARE shared bigint;
      BEGIN
        SELECT count(*) INTO shared FROM (
          SELECT 1 FROM payments WHERE provider_ref IS NOT NULL GROUP BY provider, provider_ref HAVING count(*) > 1
        ) AS duplicates;
        IF shared > 0 THEN
          RAISE EXCEPTION 'payments: % provider reference(s) are each held by more than one payment; resolve them before upgrading (README, Upgrading)', shared;
        END IF;
      END $$;`);
    // A hand build that failed (INVALID), or one built without UNIQUE, would be taken by IF NOT EXISTS and renamed
    // into place: the reference would never be held unique. Either is dropped and built here.
    this.addSql(dropInvalidIndexSql('payments_provider_ref_new_idx'));
    this.addSql(`DO $$ BEGIN
      IF EXISTS (SELECT 1 FROM pg_index WHERE indexrelid = to_regclass('payments_provider_ref_new_idx') AND NOT indisunique) THEN
        DROP INDEX payments_provider_ref_new_idx;
      END IF;
    END $$;`);
    this.addSql(`CREATE UNIQUE INDEX IF NOT EXISTS payments_provider_ref_new_idx ON payments (provider, provider_ref) WHERE provider_ref IS NOT NULL;`);
    this.addSql('DROP INDEX payments_provider_ref_idx;');
    this.addSql('ALTER INDEX payments_provider_ref_new_idx RENAME TO payments_provider_ref_idx;');
  }

  override async down(): Promise<void> {
    this.addSql('CREATE INDEX payments_provider_ref_old_idx ON payments (provider, provider_ref);');
    this.addSql('DROP INDEX payments_provider_ref_idx;');
    this.addSql('ALTER INDEX payments_provider_ref_old_idx RENAME TO payments_provider_ref_idx;');
  }
}
