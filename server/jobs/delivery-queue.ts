import type { Agenda } from 'agenda';
import type { EntityManager } from '@mikro-orm/postgresql';
import type { DeliveryQueue } from '../domain/ports.js';

/**
 * The channel the database NOTIFYs when a delivery becomes due now: at the commit of a new outbox row
 * or of a delivery put back in the queue (migration 20261123001301), and by the sweeper.
 */
export const DELIVERIES_DUE_CHANNEL = 'webhook_deliveries_due';

export const DELIVER_WEBHOOK_JOB = 'webhook.deliver';
export interface DeliverWebhookData {
  deliveryId: string;
}

/**
 * The domain's DeliveryQueue. A delivery due now needs nothing from the writer after its commit: the
 * commit itself NOTIFYs the workers (a trigger on webhook_deliveries), so `enqueue` costs no round trip.
 * A retry is an Agenda job at its due time; a job only names the delivery — the lease and the due
 * time on the row decide whether it is sent, so a duplicate or early job is harmless.
 */
export class AgendaDeliveryQueue implements DeliveryQueue {
  constructor(private readonly agenda: Agenda, private readonly em: EntityManager) {}

  /** Nothing to do: the commit that made these deliveries due already woke the workers. */
  async enqueue(_deliveryIds: readonly string[]): Promise<void> {}

  /** Books the next scheduled attempt of a retrying delivery. */
  async scheduleAt(deliveryId: string, when: Date): Promise<void> {
    await this.agenda.schedule<DeliverWebhookData>(when, DELIVER_WEBHOOK_JOB, { deliveryId });
  }

  /** Wakes every listening worker to look for due deliveries (the sweeper's rescue). */
  async wakeWorkers(): Promise<void> {
    await this.em.execute(`SELECT pg_notify(?, '')`, [DELIVERIES_DUE_CHANNEL]);
  }
}
