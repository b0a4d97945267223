import { Migration } from '@mikro-orm/migrations';
import { dropInvalidIndexSql } from './Migration20261128002201_dead_deliveries_index_without_tests.js';

/**
 * Indexes for lookups that read a whole table, some of them under a lock:
 * - provider_status_queries_open_confirmation_idx: openConfirmation's check for a confirmation still open
 *   (domain/inbound/confirmation-queries.ts), run under an advisory lock on every unverifiable notification;
 *   partial, so it holds only the few queries still unanswered.
 * - provider_status_queries_created_idx: the retention prune (StatusQueryRetention, `provider-events.prune`)
 *   reads the queries past PROVIDER_EVENT_RETENTION by it, not the whole table.
 * - payment_transitions_refund_idx: a refused refund move is audited once (status-writer.ts
 *   refuseCompletionThatDoesNotFit, auditRefusalOnce) by a lookup by refund_id while the payment and the
 *   refund are locked FOR UPDATE; the largest table, never pruned. Partial: a payment's own moves add nothing.
 * - sandbox_mobilemoney_reversals_originator_idx: the simulator's status query about a reversal
 *   (findReversalByOriginator).
 *
 * payment_transitions and provider_status_queries may be large: each index may be built CONCURRENTLY by
 * hand before `migrate` (README "Upgrading"), so this one finds it (IF NOT EXISTS); an INVALID one a
 * cancelled hand build left is dropped and built again. Index builds only: each holds its table's writes
 * (not its reads) until the batch commits.
 */
const INDEXES = [
  { name: 'provider_status_queries_open_confirmation_idx', on: 'provider_status_queries (provider, merchant_id, code) WHERE confirms IS NOT NULL AND completed_at IS NULL' },
  { name: 'provider_status_queries_created_idx', on: 'provider_status_queries (created_at)' },
  { name: 'payment_transitions_refund_idx', on: 'payment_transitions (refund_id) WHERE refund_id IS NOT NULL' },
  { name: 'sandbox_mobilemoney_reversals_originator_idx', on: 'sandbox_mobilemoney_reversals (originator_conversation_id)' },
];

export class Migration20261129160000_lookup_and_prune_indexes extends Migration {
  override async up(): Promise<void> {
    for (const { name, on } of INDEXES) {
      this.addSql(dropInvalidIndexSql(name));
      this.addSql(`CREATE INDEX IF NOT EXISTS ${name} ON ${on};`);
    }
  }

  override async down(): Promise<void> {
    for (const { name } of INDEXES) this.addSql(`DROP INDEX IF EXISTS ${name};`);
  }
}
