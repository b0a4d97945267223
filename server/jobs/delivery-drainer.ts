import { RequestContext } from '@mikro-orm/core';
import type { LeasedDelivery } from '../domain/delivery/delivery-store.js';
import { claimQueuedDeliveries } from './delivery-claims.js';
import type { JobContext } from './job-context.js';

export interface DrainerOptions {
  /** Attempts under way at once in this process (each holds an HTTP request, then one short transaction). */
  maxInFlight: number;
  /** How often an idle worker looks for due deliveries. */
  idleMs: number;
}

/** Claim only when at least this many slots are free, so claims stay batched under load. */
const MIN_CLAIM = 8;

/**
 * The worker's bulk path for queued webhook deliveries: takes over many due `webhook.deliver` jobs and
 * leases their deliveries in one statement (`claimQueuedDeliveries`), sends up to `maxInFlight` at once
 * over keep-alive connections, and records each attempt as the job would (attempt row, retry schedule,
 * dead-lettering). The queue stays Agenda's: the outbox enqueues a job per delivery at commit, retries
 * are booked as scheduled jobs, and the sweeper re-enqueues lost ones; a job Agenda runs itself is sent
 * the usual way. Without this loop every delivery is still sent by its job.
 */
export class DeliveryDrainer {
  private inFlight = new Set<Promise<void>>();
  private stopped = false;
  private wake: (() => void) | null = null;
  private running: Promise<void> | null = null;

  constructor(private readonly container: JobContext, private readonly options: DrainerOptions) {}

  start(): void {
    this.running ??= this.loop();
  }

  /** Stops claiming and waits for the attempts under way to be recorded. */
  async stop(): Promise<void> {
    this.stopped = true;
    this.wake?.();
    await this.running;
  }

  private async loop(): Promise<void> {
    const { logger, orm, services } = this.container;
    while (!this.stopped) {
      const free = this.options.maxInFlight - this.inFlight.size;
      if (free < Math.min(MIN_CLAIM, this.options.maxInFlight)) {
        await this.pause(this.options.idleMs);
        continue;
      }
      let batch: LeasedDelivery[] = [];
      try {
        batch = await RequestContext.create(orm.em, () => claimQueuedDeliveries(orm.em, free, services.deliveries.attemptLeaseMs));
      } catch (err) {
        logger.error({ err: { type: (err as Error).name, message: (err as Error).message } }, 'claiming due webhook deliveries failed');
      }
      if (batch.length === 0) {
        await this.pause(this.options.idleMs);
        continue;
      }
      for (const leased of batch) this.send(leased);
    }
    await Promise.all(this.inFlight);
  }

  private send(leased: LeasedDelivery): void {
    const { deliveryQueue, logger, orm, services } = this.container;
    const attempt = RequestContext.create(orm.em, async () => {
      const outcome = await services.deliveries.attemptLeased(leased);
      // If the process dies before this, the sweeper finds the due row.
      if (outcome.status === 'retrying' && outcome.nextAttemptAt) await deliveryQueue.scheduleAt(leased.id, outcome.nextAttemptAt);
    })
      .catch((err: Error) => logger.error({ deliveryId: leased.id, err: { type: err.name, message: err.message } }, 'webhook attempt failed to run'))
      .finally(() => {
        this.inFlight.delete(attempt);
        this.wake?.();
      });
    this.inFlight.add(attempt);
  }

  /** Waits `ms`, or less when an attempt finishes or the drainer stops. */
  private pause(ms: number): Promise<void> {
    return new Promise((resolve) => {
      const timer = setTimeout(done, ms);
      function done() {
        clearTimeout(timer);
        resolve();
      }
      this.wake = () => {
        this.wake = null;
        done();
      };
    });
  }
}
