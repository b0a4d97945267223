import { inOrmScope } from '../persistence/orm-scope.js';
import type { LeasedDelivery } from '../domain/delivery/delivery-store.js';
import type { JobContext } from './job-context.js';

export interface DrainerOptions {
  /** HTTP requests under way at once in this process. */
  maxInFlight: number;
  /** Wait before claiming again after a failed claim (e.g. the database is restarting). */
  retryMs: number;
  /**
   * Claim at least this often even when no notification came: a wake-up can be lost (the listening
   * connection died unnoticed, a NOTIFY was never sent), and the sweeper's rescue is itself a NOTIFY.
   */
  pollMs: number;
  /**
   * Claim again once this many attempts were recorded since the last claim (or none is left): each
   * recorded attempt frees a place in its merchant's in-flight share, which a short claim left full.
   * At most the per-merchant share, so a merchant at its share is always served again.
   */
  reclaimAfterRecorded: number;
}

/** Claim only when at least this many slots are free, so claims stay batched under load… */
const MIN_CLAIM = 8;
/**
 * …or when fewer are free but something has been due for this long: slots held by endpoints that hang
 * may not free up for a whole request timeout, and the free ones must still serve the other merchants.
 */
const SHORT_CLAIM_WAIT_MS = 50;
/** Sent attempts whose results are still being recorded, at most this many times `maxInFlight`. */
const MAX_UNRECORDED_FACTOR = 4;

/**
 * A worker's loop for first attempts (and anything else due): woken by the NOTIFY that follows the commit
 * of a delivery due now (a ChangeNotifications on DELIVERIES_DUE_CHANNEL, see service.ts), it leases many
 * due deliveries in one statement, sends up to `maxInFlight` at once over keep-alive connections, and
 * records each attempt (successes in groups).
 * It keeps claiming while the last claim came back full or attempts finish (a merchant at its in-flight
 * share gets its next delivery as one of its attempts is recorded), then sleeps until the next notification,
 * or at most `pollMs` (a claim that finds nothing is one indexed statement).
 * Agenda keeps the scheduled retries (a failed attempt books the next one as a job, which wakes this
 * loop at the due time: retries are claimed here too, within the merchant's share) and the sweeper,
 * which wakes the workers for anything due that nobody took (no worker listening, a lost retry job,
 * an expired lease). Leases keep any number of workers from sending a delivery twice at once.
 */
export class DeliveryDrainer {
  /** Attempts not yet recorded (sending, or sent and waiting for their group to be written). */
  private inFlight = new Set<Promise<void>>();
  /** Of those, the ones whose HTTP exchange is still under way. */
  private sending = 0;
  private stopped = false;
  /** Something may be due: set by a notification, and by a claim that came back full. */
  private due = false;
  private wake: (() => void) | null = null;
  private running: Promise<void> | null = null;
  /** When the last claim was made (performance.now()): the fallback poll counts from it. */
  private lastClaimAt = Number.NEGATIVE_INFINITY;
  /** Attempts recorded since the last claim. */
  private recordedSinceClaim = 0;
  /** Since when (performance.now()) something is due and some, but fewer than MIN_CLAIM, slots are free. */
  private shortSince: number | null = null;

  constructor(private readonly container: JobContext, private readonly options: DrainerOptions) {}

  start(): void {
    this.running ??= this.loop();
  }

  /** Deliveries may be due now (a notification arrived, or the listener (re)connected). */
  notifyDue(): void {
    this.due = true;
    this.wake?.();
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
      // A slot frees when its response arrives: recording it (in a group) does not hold up the next request.
      const free = Math.min(this.options.maxInFlight - this.sending, this.options.maxInFlight * MAX_UNRECORDED_FACTOR - this.inFlight.size);
      const untilPoll = this.lastClaimAt + this.options.pollMs - performance.now();
      if (untilPoll <= 0) this.due = true;
      if (!this.due || free <= 0) {
        await this.pause(this.due ? undefined : untilPoll);
        continue;
      }
      if (free < Math.min(MIN_CLAIM, this.options.maxInFlight)) {
        // Wait a little for more slots, so a busy worker still claims in batches; but not for ever.
        this.shortSince ??= performance.now();
        const untilShortClaim = this.shortSince + SHORT_CLAIM_WAIT_MS - performance.now();
        if (untilShortClaim > 0) {
          await this.pause(untilShortClaim);
          continue;
        }
      }
      this.shortSince = null;
      this.due = false;
      this.recordedSinceClaim = 0;
      this.lastClaimAt = performance.now();
      let batch: LeasedDelivery[];
      try {
        batch = await inOrmScope(orm.em, () => services.deliveries.leaseDue(free));
      } catch (err) {
        logger.error({ err: { type: (err as Error).name, message: (err as Error).message } }, 'claiming due webhook deliveries failed');
        this.due = true;
        await this.pause(this.options.retryMs);
        continue;
      }
      // A full batch may have left more behind; so may a short one, when merchants at their in-flight
      // share were left out (their next delivery is claimed as their attempts are recorded: see send).
      if (batch.length === free) this.due = true;
      for (const leased of batch) this.send(leased);
    }
    await Promise.all(this.inFlight);
  }

  private send(leased: LeasedDelivery): void {
    const { deliveryQueue, logger, orm, services } = this.container;
    this.sending += 1;
    let sent = false;
    const onSent = () => {
      if (sent) return;
      sent = true;
      this.sending -= 1;
      this.wake?.();
    };
    const attempt = inOrmScope(orm.em, async () => {
      const outcome = await services.deliveries.attemptLeased(leased, onSent);
      // If the process dies before this, the sweeper finds the due row.
      if (outcome?.status === 'retrying' && outcome.nextAttemptAt) await deliveryQueue.scheduleAt(leased.id, outcome.nextAttemptAt);
    })
      .catch((err: Error) => logger.error({ deliveryId: leased.id, err: { type: err.name, message: err.message } }, 'webhook attempt failed to run'))
      .finally(() => {
        onSent();
        this.inFlight.delete(attempt);
        // Recorded, its lease released: its merchant's in-flight share has room again, so that merchant's
        // next due delivery may be claimed (a claim that left it out came back short, which wakes nobody).
        // Batched, so claims stay few: see reclaimAfterRecorded.
        this.recordedSinceClaim += 1;
        if (this.recordedSinceClaim >= this.options.reclaimAfterRecorded || this.inFlight.size === 0) this.due = true;
        this.wake?.();
      });
    this.inFlight.add(attempt);
  }

  /** Waits for a notification, a finished attempt or the stop (at most `ms` when given). */
  private pause(ms?: number): Promise<void> {
    return new Promise((resolve) => {
      const timer = ms === undefined ? null : setTimeout(done, ms);
      const self = this;
      function done() {
        if (timer) clearTimeout(timer);
        if (self.wake === wake) self.wake = null;
        resolve();
      }
      const wake = () => done();
      this.wake = wake;
    });
  }
}
