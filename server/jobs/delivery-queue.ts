import type { Agenda } from 'agenda';
import type { DeliveryQueue } from '../domain/ports.js';

export const DELIVER_WEBHOOK_JOB = 'webhook.deliver';
export interface DeliverWebhookData {
  deliveryId: string;
}

/**
 * Delivery attempts as Agenda jobs. A job only names the delivery: the lease and the due time on
 * the row decide whether it is sent, so a duplicate or early job is harmless.
 */
export class AgendaDeliveryQueue implements DeliveryQueue {
  constructor(private readonly agenda: Agenda) {}

  async enqueue(deliveryIds: readonly string[]): Promise<void> {
    for (const deliveryId of deliveryIds) await this.agenda.now<DeliverWebhookData>(DELIVER_WEBHOOK_JOB, { deliveryId });
  }

  /** Books the next scheduled attempt of a retrying delivery. */
  async scheduleAt(deliveryId: string, when: Date): Promise<void> {
    await this.agenda.schedule<DeliverWebhookData>(when, DELIVER_WEBHOOK_JOB, { deliveryId });
  }
}
