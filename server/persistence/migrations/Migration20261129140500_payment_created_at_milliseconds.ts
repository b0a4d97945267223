import { Migration } from '@mikro-orm/migrations';

/**
 * payments.created_at is stamped to the millisecond, the precision it is shown with (`created_at` of the
 * API, a JS Date's toISOString): a payment shown `…10:00:00.123Z` is stored at .123000, so `since` set to
 * the shown value lists it no more (since is exclusive), and `until` set to it no longer lists it either.
 * Stamped with now() it was at .123700, after .123Z, and listed. Truncated, never rounded: never later
 * than the transaction's start, and in the same week (payment_week) as now() is.
 *
 * Only the default changes (a catalog update, no table rewrite). Existing rows keep their microseconds:
 * a trigger refuses a change of created_at, and the week counters are keyed on it.
 */
export class Migration20261129140500_payment_created_at_milliseconds extends Migration {
  override async up(): Promise<void> {
    this.addSql(`ALTER TABLE payments ALTER COLUMN created_at SET DEFAULT date_trunc('milliseconds', now());`);
  }

  override async down(): Promise<void> {
    this.addSql('ALTER TABLE payments ALTER COLUMN created_at SET DEFAULT now();');
  }
}
