import { Migration } from '@mikro-orm/migrations';

/**
 * The cardpay simulator's rolled secret keys (sandbox/cardpay/keys.ts): the key a roll issued and the key
 * it replaced, each by the sha256 of the key (never the key), with the account it acts on and, for a
 * replaced key, when it expires. A key with no row is its own account (its sha256), as every key was before.
 */
export class Migration20261129100000_sandbox_cardpay_keys extends Migration {
  override async up(): Promise<void> {
    this.addSql(`CREATE TABLE sandbox_cardpay_keys (
      key_hash text PRIMARY KEY,
      account text NOT NULL,
      expires_at timestamptz,
      created_at timestamptz NOT NULL DEFAULT now()
    );`);
  }

  override async down(): Promise<void> {
    this.addSql('DROP TABLE sandbox_cardpay_keys;');
  }
}
