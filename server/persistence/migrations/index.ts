import type { MigrationObject } from '@mikro-orm/core';
import { Migration20261122000001_foundation } from './Migration20261122000001_foundation.js';
import { Migration20261122000002_payments } from './Migration20261122000002_payments.js';
import { Migration20261122000101_sandbox_cardpay } from './Migration20261122000101_sandbox_cardpay.js';
import { Migration20261122000201_sandbox_walletpay } from './Migration20261122000201_sandbox_walletpay.js';
import { Migration20261122000401_mobilemoney_operations } from './Migration20261122000401_mobilemoney_operations.js';
import { Migration20261122000402_rate_limits } from './Migration20261122000402_rate_limits.js';
import { Migration20261122000501_payment_list_indexes } from './Migration20261122000501_payment_list_indexes.js';
import { Migration20261122000601_idempotency_keys } from './Migration20261122000601_idempotency_keys.js';
import { Migration20261122000602_refresh_leases } from './Migration20261122000602_refresh_leases.js';
import { Migration20261123000601_events_api } from './Migration20261123000601_events_api.js';
import { Migration20261122000301_sandbox_mobilemoney } from './Migration20261122000301_sandbox_mobilemoney.js';
import { Migration20261123000101_integrity_audit } from './Migration20261123000101_integrity_audit.js';
import { Migration20261123000102_sandbox_misreport } from './Migration20261123000102_sandbox_misreport.js';
import { Migration20261123000701_sandbox_cardpay_fidelity } from './Migration20261123000701_sandbox_cardpay_fidelity.js';
import { Migration20261123000702_sandbox_certificates } from './Migration20261123000702_sandbox_certificates.js';
import { Migration20261123000801_rate_limit_buckets } from './Migration20261123000801_rate_limit_buckets.js';
import { Migration20261123000302_sandbox_mobilemoney_query_count } from './Migration20261123000302_sandbox_mobilemoney_query_count.js';
import { Migration20261123000901_provider_status_queries } from './Migration20261123000901_provider_status_queries.js';
import { Migration20261123000902_payment_counts } from './Migration20261123000902_payment_counts.js';
import { Migration20261123001501_idempotency_key_retention } from './Migration20261123001501_idempotency_key_retention.js';
import { Migration20261123001401_confirmation_queries } from './Migration20261123001401_confirmation_queries.js';
import { Migration20261123001101_access_change_notifications } from './Migration20261123001101_access_change_notifications.js';
import { Migration20261123001201_sandbox_cardpay_idempotency_expiry } from './Migration20261123001201_sandbox_cardpay_idempotency_expiry.js';
import { Migration20261123001301_delivery_due_notify } from './Migration20261123001301_delivery_due_notify.js';
import { Migration20261123001601_payment_week_counts } from './Migration20261123001601_payment_week_counts.js';
import { Migration20261126000101_payment_counter_moves } from './Migration20261126000101_payment_counter_moves.js';
import { Migration20261126000102_drop_payment_reference_index } from './Migration20261126000102_drop_payment_reference_index.js';
import { Migration20261126000103_payment_counter_update_statements } from './Migration20261126000103_payment_counter_update_statements.js';
import { Migration20261126000201_idempotency_keys_hot_finish } from './Migration20261126000201_idempotency_keys_hot_finish.js';
import { Migration20261126000301_delivery_wakeups_after_commit } from './Migration20261126000301_delivery_wakeups_after_commit.js';
import { Migration20261126000401_payment_count_changes } from './Migration20261126000401_payment_count_changes.js';
import { Migration20261127000101_unresolved_payments_index } from './Migration20261127000101_unresolved_payments_index.js';
import { Migration20261127000102_dead_deliveries_index } from './Migration20261127000102_dead_deliveries_index.js';
import { Migration20261127000201_payment_metadata } from './Migration20261127000201_payment_metadata.js';
import { Migration20261127000301_pending_refunds_index } from './Migration20261127000301_pending_refunds_index.js';

/**
 * Every migration, in order. Listed explicitly (not globbed) so tsx, jest and a compiled build all
 * load the same set. A new migration is a new file here, listed below.
 */
export const migrationsList: MigrationObject[] = [
  { name: 'Migration20261122000001_foundation', class: Migration20261122000001_foundation },
  { name: 'Migration20261122000002_payments', class: Migration20261122000002_payments },
  { name: 'Migration20261122000101_sandbox_cardpay', class: Migration20261122000101_sandbox_cardpay },
  { name: 'Migration20261122000201_sandbox_walletpay', class: Migration20261122000201_sandbox_walletpay },
  { name: 'Migration20261122000301_sandbox_mobilemoney', class: Migration20261122000301_sandbox_mobilemoney },
  { name: 'Migration20261122000401_mobilemoney_operations', class: Migration20261122000401_mobilemoney_operations },
  { name: 'Migration20261122000402_rate_limits', class: Migration20261122000402_rate_limits },
  { name: 'Migration20261122000501_payment_list_indexes', class: Migration20261122000501_payment_list_indexes },
  { name: 'Migration20261122000601_idempotency_keys', class: Migration20261122000601_idempotency_keys },
  { name: 'Migration20261122000602_refresh_leases', class: Migration20261122000602_refresh_leases },
  { name: 'Migration20261123000601_events_api', class: Migration20261123000601_events_api },
  { name: 'Migration20261123000101_integrity_audit', class: Migration20261123000101_integrity_audit },
  { name: 'Migration20261123000102_sandbox_misreport', class: Migration20261123000102_sandbox_misreport },
  { name: 'Migration20261123000701_sandbox_cardpay_fidelity', class: Migration20261123000701_sandbox_cardpay_fidelity },
  { name: 'Migration20261123000702_sandbox_certificates', class: Migration20261123000702_sandbox_certificates },
  { name: 'Migration20261123000801_rate_limit_buckets', class: Migration20261123000801_rate_limit_buckets },
  { name: 'Migration20261123000302_sandbox_mobilemoney_query_count', class: Migration20261123000302_sandbox_mobilemoney_query_count },
  { name: 'Migration20261123000901_provider_status_queries', class: Migration20261123000901_provider_status_queries },
  { name: 'Migration20261123000902_payment_counts', class: Migration20261123000902_payment_counts },
  { name: 'Migration20261123001501_idempotency_key_retention', class: Migration20261123001501_idempotency_key_retention },
  { name: 'Migration20261123001401_confirmation_queries', class: Migration20261123001401_confirmation_queries },
  { name: 'Migration20261123001101_access_change_notifications', class: Migration20261123001101_access_change_notifications },
  { name: 'Migration20261123001201_sandbox_cardpay_idempotency_expiry', class: Migration20261123001201_sandbox_cardpay_idempotency_expiry },
  { name: 'Migration20261123001301_delivery_due_notify', class: Migration20261123001301_delivery_due_notify },
  { name: 'Migration20261123001601_payment_week_counts', class: Migration20261123001601_payment_week_counts },
  { name: 'Migration20261126000101_payment_counter_moves', class: Migration20261126000101_payment_counter_moves },
  { name: 'Migration20261126000102_drop_payment_reference_index', class: Migration20261126000102_drop_payment_reference_index },
  { name: 'Migration20261126000103_payment_counter_update_statements', class: Migration20261126000103_payment_counter_update_statements },
  { name: 'Migration20261126000201_idempotency_keys_hot_finish', class: Migration20261126000201_idempotency_keys_hot_finish },
  { name: 'Migration20261126000301_delivery_wakeups_after_commit', class: Migration20261126000301_delivery_wakeups_after_commit },
  { name: 'Migration20261126000401_payment_count_changes', class: Migration20261126000401_payment_count_changes },
  { name: 'Migration20261127000101_unresolved_payments_index', class: Migration20261127000101_unresolved_payments_index },
  { name: 'Migration20261127000102_dead_deliveries_index', class: Migration20261127000102_dead_deliveries_index },
  { name: 'Migration20261127000201_payment_metadata', class: Migration20261127000201_payment_metadata },
  { name: 'Migration20261127000301_pending_refunds_index', class: Migration20261127000301_pending_refunds_index },
];
