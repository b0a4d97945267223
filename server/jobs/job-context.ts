import type { Agenda } from 'agenda';
import type { Provider } from '../../contract/index.js';
import type { MikroORM } from '@mikro-orm/postgresql';
import type { AppConfig } from '../config/config.js';
import type { DeliveryService } from '../domain/delivery/delivery.service.js';
import type { EventLog } from '../domain/events/event-log.js';
import type { IdempotencyKeyRetention } from '../domain/payments/idempotency-key-retention.js';
import type { InboxRetention } from '../domain/inbound/inbox-retention.js';
import type { StatusQueryRetention } from '../domain/inbound/status-query-retention.js';
import type { RateLimitRetention } from '../domain/auth/rate-limit-retention.js';
import type { ProviderOperationsService } from '../domain/operations/provider-operations.service.js';
import type { StatusSyncService } from '../domain/payments/status-sync.service.js';
import type { AbandonFailedService } from '../domain/payments/abandon-failed.service.js';
import type { CardDetachService } from '../domain/cards/card-detach.service.js';
import type { RefundSyncService } from '../domain/refunds/refund-sync.service.js';
import type { ProviderRegistry } from '../domain/ports.js';
import type { Logger } from '../observability/logger.js';
import type { KeyLock } from '../persistence/key-lock.js';
import type { SandboxDeps } from '../sandbox/module.js';
import type { AgendaDeliveryQueue } from './delivery-queue.js';

/**
 * What the job bodies need, named explicitly (the container satisfies it; jobs never import the
 * container, so the container may import jobs without an import circle).
 */
export interface JobContext {
  config: AppConfig;
  logger: Logger;
  orm: MikroORM;
  agenda: Agenda;
  keyLock: KeyLock;
  /** What keeps each merchant's automatic reconciliation job in line with its credentials (alignReconciliation). */
  reconcileScheduling: ReconciliationScheduling;
  deliveryQueue: AgendaDeliveryQueue;
  providers: ProviderRegistry;
  services: {
    deliveries: DeliveryService;
    events: EventLog;
    idempotencyKeyRetention: IdempotencyKeyRetention;
    inboxRetention: InboxRetention;
    statusQueryRetention: StatusQueryRetention;
    rateLimitRetention: RateLimitRetention;
    statusSync: StatusSyncService;
    abandonFailed: AbandonFailedService;
    cardDetach: CardDetachService;
    refundSync: RefundSyncService;
    operations: ProviderOperationsService;
  };
  sandboxDeps: SandboxDeps;
  /** Set when the process begins its graceful stop: long job runs end early. */
  readonly draining: boolean;
}

/** What keeps a merchant's automatic reconciliation job in line with its credentials (reconcile-transactions.job.ts, alignReconciliation). */
export interface ReconciliationScheduling {
  agenda: Agenda;
  keyLock: KeyLock;
  intervalMs: number;
  /** Whether the merchant has credentials now (read under the lock). */
  hasCredentials: (merchantId: string, provider: Provider) => Promise<boolean>;
}
