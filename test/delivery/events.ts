import { randomUUID } from 'node:crypto';
import type { EntityManager } from '@mikro-orm/postgresql';
import { appendEvent } from '../../server/domain/events/outbox.js';
import type { MerchantEventType } from '../../server/domain/events/merchant-events.js';
import type { TestService } from '../support/service.js';

export interface DeliveryRow {
  id: string;
  event_id: string;
  status: string;
  attempts: number;
  last_response_status: number | null;
  last_error: string | null;
  next_attempt_at: Date | null;
  delivered_at: Date | null;
  lease_until: Date | null;
  url: string;
}

/**
 * Writes an event the way the payments domain does (outbox, in a transaction, then DeliveryQueue.enqueue).
 * `notify: false` commits it without the wake-up (no enqueue), as when the writer stopped right after
 * its commit: only a drain loop's fallback claim or the sweeper sends it. `adjust` runs in the same
 * transaction (a test giving the delivery another state): a delivery committed due now may be claimed
 * at any moment after its commit.
 */
export async function emitEvent(
  t: TestService,
  merchantId: string,
  options: {
    type?: MerchantEventType;
    paymentId?: string;
    notify?: boolean;
    adjust?: (tx: EntityManager, ids: { deliveryId: string; eventId: string }) => Promise<unknown>;
  } = {},
): Promise<{ eventId: string; deliveryId: string; paymentId: string }> {
  const paymentId = options.paymentId ?? randomUUID();
  const type = options.type ?? 'payment.completed';
  const { em } = t.service.container.orm;
  const appended = await t.inContext(() =>
    em.transactional(async (tx) => {
      const appended = await appendEvent(tx, {
        merchantId,
        paymentId,
        type,
        data: {
          payment_id: paymentId, amount: '25.00', currency: 'USD', provider: 'cardpay',
          status: type === 'payment.failed' ? 'failed' : type === 'payment.refunded' ? 'refunded' : 'completed',
          previous_status: type === 'payment.refunded' ? 'completed' : 'pending',
        },
      });
      if (appended.deliveryId) await options.adjust?.(tx, { deliveryId: appended.deliveryId, eventId: appended.eventId });
      return appended;
    }),
  );
  if (!appended.deliveryId) throw new Error('merchant has no webhook URL');
  if (options.notify !== false) await t.service.container.deliveryQueue.enqueue(1);
  return { eventId: appended.eventId, deliveryId: appended.deliveryId, paymentId };
}

export async function delivery(t: TestService, id: string): Promise<DeliveryRow> {
  const rows = await t.sql<DeliveryRow & Record<string, unknown>>('SELECT * FROM webhook_deliveries WHERE id = $1', [id]);
  if (!rows[0]) throw new Error(`delivery ${id} not found`);
  return rows[0];
}

export async function attemptsOf(t: TestService, id: string) {
  return t.sql<{ attempt_number: number; trigger: string; response_status: number | null; error: string | null; duration_ms: number }>(
    'SELECT attempt_number, trigger, response_status, error, duration_ms FROM delivery_attempts WHERE delivery_id = $1 ORDER BY attempt_number',
    [id],
  );
}

/** Registers the merchant's webhook URL through the API and returns the signing secret. */
export async function registerWebhook(t: TestService, apiKey: string, url: string): Promise<string> {
  const res = await t.http.put('/v1/merchant/webhook').set('X-API-Key', apiKey).send({ webhook_url: url });
  if (res.status !== 200) throw new Error(`webhook registration failed: ${res.status} ${JSON.stringify(res.body)}`);
  return res.body.data.webhook_secret as string;
}
