import { Migration } from '@mikro-orm/migrations';

/** Merchants, their API keys and their (encrypted) provider credentials. */
export class Migration20261122000001_foundation extends Migration {
  override async up(): Promise<void> {
    this.addSql(`
      CREATE TABLE merchants (
        id uuid PRIMARY KEY,
        name text NOT NULL,
        webhook_url text NULL,
        webhook_secret_enc text NULL,
        created_at timestamptz NOT NULL DEFAULT now(),
        updated_at timestamptz NOT NULL DEFAULT now()
      );`);
    this.addSql(`
      CREATE TABLE api_keys (
        id uuid PRIMARY KEY,
        merchant_id uuid NOT NULL REFERENCES merchants(id) ON DELETE CASCADE,
        key_hash text NOT NULL UNIQUE,
        key_prefix text NOT NULL,
        scopes text[] NOT NULL,
        revoked_at timestamptz NULL,
        created_at timestamptz NOT NULL DEFAULT now()
      );`);
    this.addSql(`CREATE INDEX api_keys_merchant_idx ON api_keys (merchant_id);`);
    this.addSql(`
      CREATE TABLE provider_credentials (
        id uuid PRIMARY KEY,
        merchant_id uuid NOT NULL REFERENCES merchants(id) ON DELETE CASCADE,
        provider text NOT NULL CHECK (provider IN ('cardpay', 'mobilemoney', 'walletpay')),
        secrets_enc text NOT NULL,
        config_summary jsonb NOT NULL,
        created_at timestamptz NOT NULL DEFAULT now(),
        updated_at timestamptz NOT NULL DEFAULT now(),
        UNIQUE (merchant_id, provider)
      );`);
  }

  override async down(): Promise<void> {
    this.addSql('DROP TABLE provider_credentials; DROP TABLE api_keys; DROP TABLE merchants;');
  }
}
