import { Migration } from '@mikro-orm/migrations';

/**
 * Status queries belong to any provider that reports a transaction's status asynchronously (today
 * mobilemoney's transaction-status API): the table loses its provider name and gains a provider column.
 */
export class Migration20261123000901_provider_status_queries extends Migration {
  override async up(): Promise<void> {
    this.addSql(`ALTER TABLE mobilemoney_status_queries RENAME TO provider_status_queries;`);
    this.addSql(`ALTER TABLE provider_status_queries ADD COLUMN provider text NOT NULL DEFAULT 'mobilemoney';`);
    this.addSql(`ALTER TABLE provider_status_queries ALTER COLUMN provider DROP DEFAULT;`);
    this.addSql(`ALTER TABLE provider_status_queries RENAME COLUMN originator_conversation_id TO provider_query_ref;`);
    this.addSql(`ALTER TABLE provider_status_queries DROP COLUMN conversation_id;`);
    this.addSql(`CREATE INDEX provider_status_queries_ref_idx ON provider_status_queries (provider, provider_query_ref);`);
  }

  override async down(): Promise<void> {
    this.addSql('DROP INDEX provider_status_queries_ref_idx;');
    this.addSql('ALTER TABLE provider_status_queries ADD COLUMN conversation_id text NULL;');
    this.addSql('ALTER TABLE provider_status_queries RENAME COLUMN provider_query_ref TO originator_conversation_id;');
    this.addSql('ALTER TABLE provider_status_queries DROP COLUMN provider;');
    this.addSql('ALTER TABLE provider_status_queries RENAME TO mobilemoney_status_queries;');
  }
}
