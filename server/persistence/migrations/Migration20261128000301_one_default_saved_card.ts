import { Migration } from '@mikro-orm/migrations';

/**
 * At most one default saved card per merchant (`saved_cards_one_default_idx`), and one whenever the
 * merchant has an active card. Before the index, rows are put right: a deleted card is never the
 * default; of several active defaults (two first saves at once) the oldest stays; a merchant whose
 * default was deleted gets its most recently saved active card as default, as a deletion now does.
 */
export class Migration20261128000301_one_default_saved_card extends Migration {
  override async up(): Promise<void> {
    this.addSql(`UPDATE saved_cards SET is_default = false WHERE is_default AND NOT active;`);
    this.addSql(`
      UPDATE saved_cards c SET is_default = false
       WHERE c.is_default
         AND EXISTS (SELECT 1 FROM saved_cards o
                      WHERE o.merchant_id = c.merchant_id AND o.is_default AND (o.created_at, o.id) < (c.created_at, c.id));`);
    this.addSql(`
      UPDATE saved_cards c SET is_default = true
       WHERE c.id IN (SELECT DISTINCT ON (merchant_id) id FROM saved_cards WHERE active ORDER BY merchant_id, created_at DESC, id DESC)
         AND NOT EXISTS (SELECT 1 FROM saved_cards d WHERE d.merchant_id = c.merchant_id AND d.is_default);`);
    this.addSql(`CREATE UNIQUE INDEX saved_cards_one_default_idx ON saved_cards (merchant_id) WHERE is_default;`);
  }

  override async down(): Promise<void> {
    this.addSql('DROP INDEX saved_cards_one_default_idx;');
  }
}
