import { Migration } from '@mikro-orm/migrations';

/** The inbox's retention job (InboxRetention) deletes entries by age: without this it scans the whole table. */
export class Migration20261128001401_provider_events_received_index extends Migration {
  override async up(): Promise<void> {
    this.addSql('CREATE INDEX provider_events_received_idx ON provider_events (received_at);');
  }

  override async down(): Promise<void> {
    this.addSql('DROP INDEX provider_events_received_idx;');
  }
}
