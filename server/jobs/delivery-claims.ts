import type { EntityManager } from '@mikro-orm/postgresql';
import { toLeased, type LeaseRow, type LeasedDelivery } from '../domain/delivery/delivery-store.js';
import { DELIVER_WEBHOOK_JOB } from './delivery-queue.js';

/**
 * Takes over, in ONE statement, up to `limit` due `webhook.deliver` jobs that no Agenda worker has
 * locked, together with their deliveries: each delivery that is sendable now (pending/retrying, due,
 * not leased) gets the attempt lease, exactly as the job would take it, and its job row is deleted
 * (the caller runs the attempt instead of Agenda). `FOR UPDATE SKIP LOCKED` on both tables lets
 * workers and Agenda claim side by side without waiting on or taking each other's rows. Jobs whose
 * delivery is not sendable are left to Agenda, which finds nothing to do, as before.
 * Only enqueued deliveries are claimed: one whose job was lost is still the sweeper's.
 */
export async function claimQueuedDeliveries(em: EntityManager, limit: number, leaseMs: number): Promise<LeasedDelivery[]> {
  return (
    await em.execute<LeaseRow[]>(
      `WITH jobs AS (
         SELECT j.id, (j.data->>'deliveryId') AS delivery_id FROM agenda_jobs j
          WHERE j.name = ? AND j.next_run_at <= now() AND j.locked_at IS NULL AND j.disabled IS NOT TRUE
          ORDER BY j.next_run_at
          LIMIT ?
          FOR UPDATE SKIP LOCKED),
       due AS (
         SELECT DISTINCT d.id FROM webhook_deliveries d JOIN jobs ON d.id::text = jobs.delivery_id
          WHERE d.status IN ('pending', 'retrying') AND d.next_attempt_at <= now()
            AND (d.lease_until IS NULL OR d.lease_until < now())
          FOR UPDATE OF d SKIP LOCKED),
       taken AS (
         DELETE FROM agenda_jobs WHERE id IN (SELECT jobs.id FROM jobs JOIN due ON due.id::text = jobs.delivery_id))
       UPDATE webhook_deliveries d
          SET lease_until = now() + ?::double precision * interval '1 millisecond'
         FROM due, events e, merchants m
        WHERE d.id = due.id AND e.id = d.event_id AND m.id = d.merchant_id
    RETURNING d.id, d.merchant_id, d.event_type, d.status, d.attempts, d.url, m.webhook_url, e.body`,
      [DELIVER_WEBHOOK_JOB, limit, leaseMs],
    )
  ).map(toLeased);
}
