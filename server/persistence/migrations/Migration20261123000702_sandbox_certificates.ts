import { Migration } from '@mikro-orm/migrations';

/**
 * Simulator certificates: walletpay serves an X.509 certificate at its certificate URL (as PayPal does),
 * and the mobilemoney simulator holds the key pair whose certificate initiator passwords are encrypted
 * with (SecurityCredential, as Daraja's).
 */
export class Migration20261123000702_sandbox_certificates extends Migration {
  override async up(): Promise<void> {
    this.addSql(`ALTER TABLE sandbox_walletpay_keys ADD COLUMN certificate_pem text NULL;`);
    this.addSql(`
      CREATE TABLE sandbox_mobilemoney_keys (
        id int PRIMARY KEY CHECK (id = 1),
        private_key_pem text NOT NULL,
        certificate_pem text NOT NULL,
        created_at timestamptz NOT NULL DEFAULT now()
      );`);
  }

  override async down(): Promise<void> {
    this.addSql(`DROP TABLE sandbox_mobilemoney_keys; ALTER TABLE sandbox_walletpay_keys DROP COLUMN certificate_pem;`);
  }
}
