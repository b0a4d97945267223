import { AsyncResource } from 'node:async_hooks';
import type { Agenda } from 'agenda';
import type { EntityManager } from '@mikro-orm/postgresql';
import type { DeliveryQueue } from '../domain/ports.js';
import type { Logger } from '../observability/logger.js';
import { queryPrepared } from '../persistence/prepared-statements.js';
import { WakeCoalescer } from './wake-coalescer.js';

/**
 * The channel workers LISTEN on: NOTIFYed after the commit of deliveries due now (new outbox rows,
 * deliveries put back in the queue) and by the sweeper.
 */
export const DELIVERIES_DUE_CHANNEL = 'webhook_deliveries_due';

/**
 * Wake-ups of one process are folded into at most one NOTIFY per this window. A NOTIFY inside the
 * writer's transaction (a trigger, until migration 20261126000301) takes PostgreSQL's cluster-wide
 * notification lock at commit and holds it until the commit has been flushed: notifying commits queue
 * one behind the other instead of sharing a flush. With commits that take 6 ms (BENCH_COMMIT_DELAY_US,
 * as behind a synchronous standby) the create bench did 261–279 req/s so, 295–352 waking after the commit.
 */
const WAKE_WINDOW_MS = 10;

export const DELIVER_WEBHOOK_JOB = 'webhook.deliver';
export interface DeliverWebhookData {
  deliveryId: string;
  /** The delivery's next_attempt_at this job is for (ISO); absent in jobs booked before it was added. */
  dueAt?: string;
}

/**
 * The domain's DeliveryQueue. Deliveries due now wake the workers with a NOTIFY after their commit,
 * sent in the background on a connection of its own and folded with the process's other wake-ups (see
 * WakeCoalescer): the writer waits for nothing. A retry is an Agenda job at its due time; a job only
 * names the delivery — the lease and the due time on the row decide whether it is sent, so a duplicate
 * or early job is harmless.
 */
export class AgendaDeliveryQueue implements DeliveryQueue {
  private readonly wakeups: WakeCoalescer;

  constructor(private readonly agenda: Agenda, private readonly em: EntityManager, logger: Logger) {
    // Bound to this (empty) async context: a send never runs inside a caller's ORM scope or transaction.
    const send = AsyncResource.bind(() => this.wakeWorkers());
    this.wakeups = new WakeCoalescer(send, WAKE_WINDOW_MS, (err) => {
      logger.warn({ err: { message: (err as Error).message } }, 'could not wake the workers for new deliveries; the sweeper will');
    });
  }

  /** Wakes the workers for deliveries committed due now (returns at once). */
  async enqueue(count: number): Promise<void> {
    if (count > 0) this.wakeups.request();
  }

  /**
   * Books the next scheduled attempt of a retrying delivery, due at `dueAt` (its next_attempt_at), to
   * run at `runAt` by this process's clock (by default the due time itself).
   */
  async scheduleAt(deliveryId: string, dueAt: Date, runAt: Date = dueAt): Promise<void> {
    await this.agenda.schedule<DeliverWebhookData>(runAt, DELIVER_WEBHOOK_JOB, { deliveryId, dueAt: dueAt.toISOString() });
  }

  /** Before the pools close: no more wake-ups (the sweeper finds whatever a dropped one was for). */
  close(): Promise<void> {
    return this.wakeups.stop();
  }

  /** Wakes every listening worker to look for due deliveries (after a commit, folded; and the sweeper's rescue). */
  async wakeWorkers(): Promise<void> {
    await queryPrepared(this.em, `SELECT pg_notify(?, '')`, [DELIVERIES_DUE_CHANNEL]);
  }
}
