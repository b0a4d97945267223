import { Migration } from '@mikro-orm/migrations';

/**
 * Every change to API keys or provider credentials sends a NOTIFY on `access_changed`, whoever makes it
 * (the api, the admin CLI, SQL by hand, a cascade from a deleted merchant), so each process drops what
 * it cached of them (persistence/change-notifications.ts). The payload names the table and the merchant;
 * a TRUNCATE names no merchant, which means everything.
 */
export class Migration20261123001101_access_change_notifications extends Migration {
  override async up(): Promise<void> {
    this.addSql(`
      CREATE FUNCTION notify_access_changed() RETURNS trigger LANGUAGE plpgsql AS $$
      BEGIN
        IF TG_LEVEL = 'STATEMENT' THEN
          PERFORM pg_notify('access_changed', json_build_object('table', TG_TABLE_NAME, 'merchant_ids', json_build_array())::text);
        ELSIF TG_OP = 'INSERT' THEN
          PERFORM pg_notify('access_changed', json_build_object('table', TG_TABLE_NAME, 'merchant_ids', json_build_array(NEW.merchant_id))::text);
        ELSIF TG_OP = 'DELETE' THEN
          PERFORM pg_notify('access_changed', json_build_object('table', TG_TABLE_NAME, 'merchant_ids', json_build_array(OLD.merchant_id))::text);
        ELSE
          PERFORM pg_notify('access_changed', json_build_object('table', TG_TABLE_NAME, 'merchant_ids', json_build_array(OLD.merchant_id, NEW.merchant_id))::text);
        END IF;
        RETURN NULL;
      END $$;`);
    for (const table of ['api_keys', 'provider_credentials']) {
      this.addSql(`CREATE TRIGGER ${table}_changed AFTER INSERT OR UPDATE OR DELETE ON ${table} FOR EACH ROW EXECUTE FUNCTION notify_access_changed();`);
      this.addSql(`CREATE TRIGGER ${table}_truncated AFTER TRUNCATE ON ${table} FOR EACH STATEMENT EXECUTE FUNCTION notify_access_changed();`);
    }
  }

  override async down(): Promise<void> {
    for (const table of ['api_keys', 'provider_credentials']) {
      this.addSql(`DROP TRIGGER ${table}_changed ON ${table}; DROP TRIGGER ${table}_truncated ON ${table};`);
    }
    this.addSql('DROP FUNCTION notify_access_changed();');
  }
}
