import { Migration } from '@mikro-orm/migrations';

/**
 * saved_cards.detach_due_at: a deleted card whose payment method is still to be detached at its provider
 * (CardDetachService). Set in the transaction that deactivates the card, cleared once the provider
 * confirmed the detach (or, after CardDetachService's bound, given up on, logged for an operator). A partial
 * index: the worker's job claims due rows, the `saved_cards_detach_due` gauge counts them.
 *
 * saved_cards.provider_account: the provider account of the credentials the card was saved under
 * (providerAccountOf): its payment method is that account's, and is never detached through credentials of
 * another account (which do not know it: "no such payment method" there would read as done). Null for
 * cards saved before, or under credentials whose account is not known: detached as before.
 * Nullable columns without a default: no table rewrite.
 */
export class Migration20261129004101_saved_card_detach_due extends Migration {
  override async up(): Promise<void> {
    this.addSql('ALTER TABLE saved_cards ADD COLUMN detach_due_at timestamptz NULL, ADD COLUMN provider_account text NULL;');
    this.addSql('CREATE INDEX saved_cards_detach_due_idx ON saved_cards (detach_due_at) WHERE detach_due_at IS NOT NULL;');
  }

  override async down(): Promise<void> {
    this.addSql('DROP INDEX saved_cards_detach_due_idx; ALTER TABLE saved_cards DROP COLUMN detach_due_at, DROP COLUMN provider_account;');
    // The recurring job that came with it (detach-cards.job.ts): a release before this one never runs it,
    // and its job gauges count every due row whatever its name, so a row left behind would page
    // PaymentsJobsBacklog for good.
    this.addSql("DELETE FROM agenda_jobs WHERE name = 'cards.detach-due';");
  }
}
