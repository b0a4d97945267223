import { Migration } from '@mikro-orm/migrations';

/**
 * The walletpay simulator's capture refusals by PayPal-Request-Id: PayPal answers a repeated id with "the
 * latest status of the previous request" (its idempotency guide), a refusal included, for as long as it
 * keeps the id (6 h). Each refused capture's id and answer, per order. It replaces the order's
 * `refused_capture_request_id`, which kept only the last INSTRUMENT_DECLINED one (carried over). That
 * column is left in place, unused: the earlier release's processes still write it during a rolling upgrade
 * (README, Production: they keep running on the newer schema); a later release drops it.
 */
export class Migration20261129043002_sandbox_walletpay_capture_refusals extends Migration {
  override async up(): Promise<void> {
    this.addSql(`CREATE TABLE sandbox_walletpay_capture_refusals (
      order_id text NOT NULL REFERENCES sandbox_walletpay_orders (id) ON DELETE CASCADE,
      request_id text NOT NULL,
      status int NOT NULL,
      details jsonb NOT NULL,
      created_at timestamptz NOT NULL DEFAULT now(),
      PRIMARY KEY (order_id, request_id)
    );`);
    this.addSql(`INSERT INTO sandbox_walletpay_capture_refusals (order_id, request_id, status, details, created_at)
      SELECT id, refused_capture_request_id, 422,
        jsonb_build_array(jsonb_build_object('issue', 'INSTRUMENT_DECLINED', 'description',
          'The instrument presented was either declined by the processor or bank, or it can''t be used for this payment.')),
        updated_at
      FROM sandbox_walletpay_orders WHERE refused_capture_request_id IS NOT NULL;`);
  }

  override async down(): Promise<void> {
    this.addSql(`UPDATE sandbox_walletpay_orders o SET refused_capture_request_id = r.request_id
      FROM (SELECT DISTINCT ON (order_id) order_id, request_id FROM sandbox_walletpay_capture_refusals
            WHERE details->0->>'issue' = 'INSTRUMENT_DECLINED' ORDER BY order_id, created_at DESC) r
      WHERE o.id = r.order_id;`);
    this.addSql('DROP TABLE sandbox_walletpay_capture_refusals;');
  }
}
