import type { EntityManager } from '@mikro-orm/postgresql';
import type { Logger } from '../../observability/logger.js';
import { setBounded } from '../../lib/bounded-map.js';
import { SecretUnreadableError } from '../crypto/secret-box.js';
import type { DeliveryAttemptCounter, DeliveryQueue, UnreadableSecretCounter } from '../ports.js';
import { TEST_EVENT_TYPE, recordTestEvent } from './test-event.js';
import { MerchantSchema, WebhookDeliverySchema, type DeliveryStatus, type WebhookDelivery } from '../../persistence/entities/index.js';
import { RECOVER_MAX_DAYS } from '../../../contract/index.js';
import { ERROR_MESSAGES } from '../../../contract/errors.js';
import { AlreadyActedError, DomainError, conflict, notFound, stillRunning, validationError } from '../errors.js';
import { compareInstants, createdWindow } from '../created-window.js';
import type { MerchantEventType } from '../events/merchant-events.js';
import type { MerchantHostResolver } from '../merchants/merchant-host-resolver.js';
import type { MerchantService } from '../merchants/merchant.service.js';
import { assertUrlShape } from '../merchants/webhook-url-policy.js';
import {
  NO_WEBHOOK_URL, countScheduledAttempts, endUnregistered, finishAttempt, findStrandedDeliveryIds, leaseDelivery, leaseDueDeliveries, leaseKey, listAttempts, msUntilDue,
  recordDeliveredAttempts, releaseUnattempted, requeueFailedDeliveries,
  type AttemptRow, type AttemptTrigger, type DeliveredAttempt, type FinishedAttempt, type LeasedDelivery, type RequeuePosition,
} from './delivery-store.js';
import { GroupWriter } from './group-writer.js';
import { afterFailedAttempt } from './retry-schedule.js';
import { signatureHeaders } from './signature.js';
import { USER_AGENT, WebhookSender, capError, type RequestSlot, type SendResult } from './webhook-sender.js';

export interface DeliveryConfig {
  /** Delays after the 1st..nth failed scheduled attempt; one more failure than its length is final. */
  retryScheduleMs: readonly number[];
  timeoutMs: number;
  allowPrivateUrls: boolean;
  /**
   * Attempts one merchant may have in flight at once, across every worker (leaseDueDeliveries). Twice it
   * bounds the merchant's open webhook requests in one process, test events and manual retries included.
   */
  maxInFlightPerMerchant: number;
}

/** The result of a scheduled attempt, so the caller can book the next one. */
export interface AttemptOutcome {
  status: DeliveryStatus;
  nextAttemptAt: Date | null;
}

/** What POST /v1/webhooks/test answers. */
export interface TestDeliveryOutcome extends SendResult {
  deliveryId: string;
  eventId: string;
  url: string;
}

export interface DeliveryFilter {
  status?: DeliveryStatus;
  eventType?: MerchantEventType;
  paymentId?: string;
  page: number;
  pageSize: number;
}

const DAY_MS = 86_400_000;

/** Headroom over the request timeout (which includes the DNS lookup) for opening the secret and recording the result. */
const LEASE_MARGIN_MS = 30_000;
/**
 * Waits before trying again a failed write of delivered attempts (a dropped connection, a database
 * restarting): without it one error fails the whole group — up to 256 deliveries the receivers answered
 * 2xx — and each is POSTed again once its lease expires. Safe to repeat: a write that did commit cleared
 * the lease tokens, so its repeat matches no row. About 3 s in all, well within LEASE_MARGIN_MS.
 */
const DELIVERED_WRITE_RETRY_DELAYS_MS = [100, 500, 2_000];
/** Deliveries recover puts back in the queue per statement. */
const RECOVER_BATCH = 1000;
/**
 * When a delivery whose signing secret this process cannot open is due again: soon the first time, since
 * another process (a rolling deploy) or this one restarted with the key may send it; not at once, which
 * would only claim it again here. Each give-back in a row doubles the wait, up to an hour: a backlog sealed
 * with a key no process has costs a claim per delivery an hour, not every 30 s for ever.
 */
const SECRET_UNREADABLE_FIRST_DELAY_MS = 30_000;
const SECRET_UNREADABLE_MAX_DELAY_MS = 3_600_000;
/** The give-back's error line is written at most once per merchant per this (the metric counts every one). */
const SECRET_UNREADABLE_LOG_INTERVAL_MS = 60_000;
/** Merchants whose last such line is remembered; past it the oldest is forgotten (at worst a line more). */
const SECRET_UNREADABLE_LOG_MERCHANTS = 1000;
/**
 * A merchant's open webhook requests in one process, as a multiple of its in-flight share: its scheduled
 * attempts (at most the share) never wait for this, and leave room for at least as many test events and
 * manual retries; past it those are refused (429) rather than opening more connections.
 */
const OPEN_REQUESTS_PER_SHARE = 2;
/** Retry-After of that refusal: a slot frees as soon as one of the merchant's requests is answered or times out. */
const OPEN_REQUESTS_RETRY_AFTER_S = 1;
/** Sealed signing secrets remembered with their plaintext (see `openSecret`). */
const OPENED_SECRETS_MAX = 1000;

/**
 * Outbound merchant webhooks: signs and sends one delivery attempt at a time, records every attempt,
 * moves the delivery along its retry schedule, and serves the merchant's delivery log.
 * Attempts go to the merchant's CURRENT webhook URL, signed with the CURRENT secret (they are
 * registered together), so fixing the endpoint and retrying a dead delivery reaches the new address.
 */
export class DeliveryService {
  /** Successful attempts finishing at about the same time are recorded in one statement. */
  private readonly delivered: GroupWriter<DeliveredAttempt, boolean>;
  private readonly openedSecrets = new Map<string, string>();
  /** Per merchant: when its last give-back line was written, and the give-backs since left out of the log. */
  private readonly unreadableLogged = new Map<string, { at: number; notLogged: number }>();
  private readonly sender: WebhookSender;

  constructor(
    private readonly em: EntityManager,
    private readonly merchants: MerchantService,
    private readonly config: DeliveryConfig,
    private readonly queue: DeliveryQueue,
    private readonly logger: Logger,
    private readonly attempts: DeliveryAttemptCounter,
    private readonly unreadableSecrets: UnreadableSecretCounter,
    hosts: MerchantHostResolver,
  ) {
    this.sender = new WebhookSender(hosts, OPEN_REQUESTS_PER_SHARE * config.maxInFlightPerMerchant);
    this.delivered = new GroupWriter(
      async (records) => {
        const updated = await recordDeliveredAttempts(this.em, records);
        return records.map((r) => updated.has(leaseKey(r.deliveryId, r.leaseToken)));
      },
      undefined,
      {
        delaysMs: DELIVERED_WRITE_RETRY_DELAYS_MS,
        onRetry: (err, tryNumber, groupSize) =>
          this.logger.warn({ err: { type: err.name, message: err.message }, tryNumber, groupSize }, 'recording delivered webhooks failed; trying again'),
      },
    );
  }

  private get leaseMs(): number {
    return this.config.timeoutMs + LEASE_MARGIN_MS;
  }

  /**
   * For a retry job (`webhook.deliver`): how long until the delivery is due by the database's clock, if
   * it is waiting for exactly `dueAt` (the time the job was booked for; any time when null) and nobody
   * holds it. A job that fired early by its worker's clock books itself again.
   */
  msUntilDue(deliveryId: string, dueAt: Date | null): Promise<{ waitMs: number; dueAt: Date } | null> {
    return msUntilDue(this.em, deliveryId, dueAt);
  }

  /** Leases up to `limit` due deliveries at once for the worker's drain loop (see leaseDueDeliveries). */
  leaseDue(limit: number): Promise<LeasedDelivery[]> {
    return leaseDueDeliveries(this.em, limit, this.leaseMs, this.config.maxInFlightPerMerchant);
  }

  /**
   * The scheduled attempt of a delivery the caller already leased (the worker's batched claims: every
   * scheduled attempt, first or retry, is taken by them, within its merchant's in-flight share).
   * `onSent` runs once the HTTP exchange is over, before the result is recorded (the lease is held until then).
   * Null when the lease was lost before the result could be recorded, or when no attempt was made: the
   * merchant's signing secret opens with none of this process's keys (the operator's key configuration,
   * not the merchant's endpoint), so the delivery is given back unsent — no attempt counted or recorded,
   * due again after a wait that doubles with each give-back in a row (SECRET_UNREADABLE_*) — rather than spending its retries on a request never sent.
   */
  async attemptLeased(leased: LeasedDelivery, onSent?: () => void): Promise<AttemptOutcome | null> {
    let secret: string | null;
    try {
      secret = this.openSecret(leased.sealedSecret);
    } catch (err) {
      if (!(err instanceof SecretUnreadableError)) throw err;
      await this.giveBackUnsent(leased, err);
      return null;
    }
    return (await this.attempt(leased, 'scheduled', 'schedule', onSent, secret)).outcome;
  }

  private async giveBackUnsent(leased: LeasedDelivery, err: SecretUnreadableError): Promise<void> {
    const retryInMs = await releaseUnattempted(this.em, leased.id, leased.leaseToken, SECRET_UNREADABLE_FIRST_DELAY_MS, SECRET_UNREADABLE_MAX_DELAY_MS);
    this.unreadableSecrets.inc();
    const now = Date.now();
    const last = this.unreadableLogged.get(leased.merchantId);
    if (last && now - last.at < SECRET_UNREADABLE_LOG_INTERVAL_MS) {
      last.notLogged += 1;
      return;
    }
    setBounded(this.unreadableLogged, leased.merchantId, { at: now, notLogged: 0 }, SECRET_UNREADABLE_LOG_MERCHANTS);
    // The key's id, never key or secret material. One line per merchant per interval, with the count it stands for.
    this.logger.error(
      {
        deliveryId: leased.id, merchantId: leased.merchantId, eventType: leased.eventType, reason: err.message, released: retryInMs !== null, retryInMs,
        givenBackSinceLastLine: last?.notLogged ?? 0,
      },
      "webhook not sent: the merchant's signing secret cannot be opened with ENCRYPTION_KEY or DECRYPTION_KEYS; the delivery is given back unattempted until a process with that key sends it",
    );
  }

  /**
   * Re-sends a dead or retrying delivery now, in the caller's request, with the same event body and
   * X-Webhook-Id. A failure changes neither the status nor the schedule. One another attempt is sending
   * right now is 409 with Retry-After (stillRunning).
   */
  async retryNow(merchantId: string, deliveryId: string): Promise<WebhookDelivery> {
    const delivery = await this.em.findOne(WebhookDeliverySchema, { id: deliveryId, merchantId });
    if (!delivery) throw notFound('webhook delivery');
    if (delivery.status !== 'dead' && delivery.status !== 'retrying') {
      throw conflict(`Only a dead or retrying delivery can be retried; this one is ${delivery.status}`);
    }
    await this.withManualSlot(merchantId, async (slot) => {
      const leased = await leaseDelivery(this.em, deliveryId, this.leaseMs);
      // Another attempt holds it (a scheduled one, or another retry waiting for the endpoint): retry shortly.
      if (!leased) throw stillRunning('The delivery is being sent right now; try again shortly');
      await this.attempt(leased, 'manual', 'unchanged', undefined, undefined, slot);
    });
    return this.em.findOneOrFail(WebhookDeliverySchema, { id: deliveryId }, { refresh: true });
  }

  /**
   * POST /v1/webhooks/recover: queues again every retrying or dead delivery of the window (created after
   * since, before until: a list's rule), due now; the workers' drain loop claims and sends each to the
   * current URL with its own body and id. Returns how many. With no URL registered it is 409 and queues
   * nothing: decided by each batch's own statement (requeueFailedDeliveries), so a removal racing the call
   * either refuses it or ends what it queued, as it ends any delivery still due.
   */
  async recover(merchantId: string, sinceText: string, untilText?: string): Promise<{ queued: number; since: Date; until: Date }> {
    const now = new Date();
    const since = new Date(sinceText);
    const end = untilText ? new Date(untilText) : now;
    if (since.getTime() < now.getTime() - RECOVER_MAX_DAYS * DAY_MS) throw validationError('since', `must be at most ${RECOVER_MAX_DAYS} days ago`);
    // Compared at every digit sent, as the window is (…00.0001 to …00.0009 is a window). With no until the
    // window ends now: the field at fault is then since, the only one the merchant sent.
    if (compareInstants(untilText ?? now.toISOString(), sinceText) <= 0) {
      throw untilText ? validationError('until', 'must be after since') : validationError('since', 'must be in the past');
    }
    // The bounds as a list compares them (to the microsecond); the answer names them to the millisecond.
    const window = createdWindow(sinceText, untilText ?? now.toISOString()) as Required<ReturnType<typeof createdWindow>>;
    // In batches, each its own statement: a large window neither holds one long transaction nor is read
    // into memory. The workers are woken after each, and start sending while the next is written.
    // Each batch starts after the last id the one before queued, and takes only deliveries not changed
    // since the first began: one queued here that fails again meanwhile is not queued twice.
    let queued = 0;
    let position: RequeuePosition = { afterId: null, startedAt: null };
    try {
      for (;;) {
        const batch = await requeueFailedDeliveries(this.em, merchantId, window, position, RECOVER_BATCH);
        // Removed before the first batch: nothing was queued. Removed between batches: the earlier ones were
        // queued and the removal ended them (the answer says how many were queued).
        if (!batch.registered && queued === 0) throw conflict(ERROR_MESSAGES.noWebhookUrl);
        if (!batch.registered) break;
        queued += batch.count;
        position = batch.position;
        await this.queue.enqueue(batch.count);
        if (batch.count < RECOVER_BATCH) break;
      }
    } catch (err) {
      // Batches already committed are being sent: a later batch's failure is no "nothing was done".
      if (queued > 0) throw new AlreadyActedError(err, `${queued} deliveries were queued again`);
      throw err;
    }
    if (queued > 0) this.logger.info({ merchantId, count: queued }, 'failed webhook deliveries queued again');
    return { queued, since, until: end };
  }

  /**
   * POST /v1/webhooks/test: records a `webhook.test` event and its delivery, sends it now and answers
   * with the attempt. A failed test is dead at once (no retries); the delivery log shows it either way,
   * but neither the dead gauge nor the dead attempts count it (see `attempt`).
   */
  async sendTest(merchantId: string): Promise<TestDeliveryOutcome> {
    const merchant = await this.em.findOne(MerchantSchema, { id: merchantId });
    if (!merchant) throw notFound('merchant');
    if (!merchant.webhookUrl) throw conflict(ERROR_MESSAGES.noWebhookUrl);
    const url = merchant.webhookUrl;
    // The slot before anything is recorded: a refused test event leaves no trace in the delivery log.
    return this.withManualSlot(merchantId, async (slot) => {
      const recorded = await this.em.transactional((tx) => recordTestEvent(tx, merchantId, url, this.leaseMs));
      const leased: LeasedDelivery = {
        id: recorded.deliveryId, merchantId, eventType: TEST_EVENT_TYPE, status: 'pending', attempts: 0, url, merchantUrl: url,
        sealedSecret: merchant.webhookSecretEnc ?? null, body: recorded.body, leaseToken: recorded.leaseToken,
        databaseClockOffsetMs: recorded.databaseClockOffsetMs,
      };
      const { result } = await this.attempt(leased, 'manual', 'dead', undefined, undefined, slot);
      return { deliveryId: recorded.deliveryId, eventId: recorded.eventId, url, ...result };
    });
  }

  /**
   * Runs a test event or manual retry with a slot of the merchant's open requests, refused at once (429)
   * when the merchant already has its bound open in this process: queued, it would wait with its timeout
   * running, and each open request is a connection (an endpoint that never answers holds one for the
   * whole timeout). The sender releases the slot once the request's connection is free.
   * Once it is over the workers are woken: while it held the delivery's lease and a place in the
   * merchant's in-flight share their claims skipped both — a scheduled attempt that fell due meanwhile, a
   * new event held back by the share — and nothing else would wake them before the next poll or sweep.
   */
  private async withManualSlot<T>(merchantId: string, run: (slot: RequestSlot) => Promise<T>): Promise<T> {
    const slot = this.sender.reserve(merchantId, 'manual');
    if (!slot) {
      const max = OPEN_REQUESTS_PER_SHARE * this.config.maxInFlightPerMerchant;
      throw new DomainError(
        'RATE_LIMITED',
        ERROR_MESSAGES.rateLimited('to your webhook endpoint', `${max} open at once, deliveries included; retry once some are answered`),
        undefined,
        { 'Retry-After': String(OPEN_REQUESTS_RETRY_AFTER_S) },
      );
    }
    try {
      return await run(slot);
    } catch (err) {
      // Not handed to the sender (or handed and already released: a release is once only).
      slot.release();
      throw err;
    } finally {
      // The attempt's own answer stands whatever the wake-up meets: the next poll or sweep wakes them then.
      await this.queue.enqueue(1).catch((err: Error) => this.logger.warn({ err: { type: err.name, message: err.message } }, 'waking the webhook workers failed'));
    }
  }

  async list(merchantId: string, filter: DeliveryFilter): Promise<{ items: WebhookDelivery[]; total: number }> {
    const [items, total] = await this.em.findAndCount(
      WebhookDeliverySchema,
      {
        merchantId,
        ...(filter.status ? { status: filter.status } : {}),
        ...(filter.eventType ? { eventType: filter.eventType } : {}),
        ...(filter.paymentId ? { paymentId: filter.paymentId } : {}),
      },
      { orderBy: { createdAt: 'desc', id: 'desc' }, limit: filter.pageSize, offset: (filter.page - 1) * filter.pageSize },
    );
    return { items, total };
  }

  async get(merchantId: string, deliveryId: string): Promise<{ delivery: WebhookDelivery; attempts: AttemptRow[] }> {
    const delivery = await this.em.findOne(WebhookDeliverySchema, { id: deliveryId, merchantId });
    if (!delivery) throw notFound('webhook delivery');
    return { delivery, attempts: await listAttempts(this.em, deliveryId) };
  }

  /** Ids the sweeper wakes the workers for: due for longer than `graceMs` and not being sent. */
  findStranded(graceMs: number, limit = 500): Promise<string[]> {
    return findStrandedDeliveryIds(this.em, graceMs, limit, this.config.maxInFlightPerMerchant);
  }

  /** `onFailure`: book the next scheduled attempt, leave status and schedule as they were (manual retry), or end it (test). */
  private async attempt(
    leased: LeasedDelivery,
    trigger: AttemptTrigger,
    onFailure: 'schedule' | 'unchanged' | 'dead',
    onSent?: () => void,
    openedSecret?: string | null,
    slot?: RequestSlot,
  ): Promise<{ outcome: AttemptOutcome | null; result: SendResult }> {
    // The merchant removed its URL (DELETE /v1/merchant/webhook): nothing goes to the address recorded on the delivery.
    // (Removed while this attempt is under way: recording its failure ends the delivery, see finishAttempt.)
    if (leased.merchantUrl === null) return this.unregistered(leased, trigger, onFailure, slot);
    const url = leased.merchantUrl;
    const result = await this.send(leased, url, openedSecret, slot);
    onSent?.();
    try {
      return await this.record(leased, url, result, trigger, onFailure);
    } catch (err) {
      // Sent: whatever fails now (the database out of reach) is no "nothing was done".
      throw new AlreadyActedError(err, 'the webhook was sent');
    }
  }

  /**
   * An attempt of a merchant with no webhook URL: nothing is sent. A scheduled one ends the delivery dead
   * (endUnregistered: no attempt recorded, so a recover after a new registration resumes its schedule) and
   * is not counted: the merchant's own action, which must not fire the operator's dead-deliveries alert
   * (see record). A manual retry is a failed attempt as before: a dead delivery's status is unchanged, a
   * retrying one is ended as the removal would have (finishAttempt).
   */
  private async unregistered(
    leased: LeasedDelivery,
    trigger: AttemptTrigger,
    onFailure: 'schedule' | 'unchanged' | 'dead',
    slot?: RequestSlot,
  ): Promise<{ outcome: AttemptOutcome | null; result: SendResult }> {
    slot?.release();
    const result: SendResult = { ok: false, responseStatus: null, error: NO_WEBHOOK_URL, durationMs: 0 };
    if (onFailure !== 'schedule') return this.record(leased, leased.url, result, trigger, onFailure);
    const ended = await endUnregistered(this.em, leased.id, leased.leaseToken);
    this.logger.info({ deliveryId: leased.id, merchantId: leased.merchantId, eventType: leased.eventType, ended }, 'webhook delivery ended unsent: the merchant has no webhook URL');
    return { outcome: ended ? { status: 'dead', nextAttemptAt: null } : null, result };
  }

  /** Records an attempt's result (see attempt), logs it and counts it. */
  private async record(
    leased: LeasedDelivery,
    url: string,
    result: SendResult,
    trigger: AttemptTrigger,
    onFailure: 'schedule' | 'unchanged' | 'dead',
  ): Promise<{ outcome: AttemptOutcome | null; result: SendResult }> {
    const attemptNumber = leased.attempts + 1;
    const record = { deliveryId: leased.id, attemptNumber, trigger, responseStatus: result.responseStatus, error: result.error, durationMs: result.durationMs };
    const update = { url, responseStatus: result.responseStatus, error: result.error };
    // A success joins the group being recorded together; a failure whose next state is fixed is one
    // statement; a failed scheduled attempt first counts the earlier ones to pick retry or dead. Every
    // write is fenced by the lease token, so the count cannot change under a write that succeeds: only
    // the holder of the current lease adds attempts.
    // A test event is never retried on the schedule: one that recover queued again is dead on a failure, as at first.
    const failure = onFailure === 'schedule' && leased.eventType === TEST_EVENT_TYPE ? 'dead' : onFailure;
    // Whether a `dead` outcome is a death the operator is told of (see below).
    let usedUpSchedule = false;
    let outcome: AttemptOutcome | null;
    let finished: FinishedAttempt | null = null;
    if (result.ok) {
      outcome = await this.recordDelivered({ ...record, url, leaseToken: leased.leaseToken });
    } else if (failure !== 'schedule') {
      outcome = finished = await finishAttempt(this.em, leased.id, leased.leaseToken, { ...update, next: { kind: failure } }, record);
    } else {
      const earlier = await countScheduledAttempts(this.em, leased.id);
      // A recovered delivery (recover leaves it `pending` with its attempts) that had already used up the
      // schedule dies again after this one attempt: that death was counted when it first died.
      usedUpSchedule = !(leased.status === 'pending' && earlier > this.config.retryScheduleMs.length);
      outcome = finished = await finishAttempt(this.em, leased.id, leased.leaseToken, { ...update, next: afterFailedAttempt(this.config.retryScheduleMs, earlier + 1) }, record);
    }
    // The merchant removed its URL while this attempt was under way: ended as the removal ends a delivery,
    // the merchant's doing, so no death through the schedule (neither counted nor a warning).
    const endedUnregistered = finished?.endedUnregistered ?? false;
    if (endedUnregistered) usedUpSchedule = false;
    if (!outcome) {
      // Sent (the merchant may see it twice: at-least-once), but the row belongs to whoever holds it now.
      this.logger.warn(
        { deliveryId: leased.id, eventType: leased.eventType, attempt: attemptNumber, trigger, responseStatus: result.responseStatus },
        'webhook attempt result not recorded: its lease had expired and the delivery was taken over',
      );
      return { outcome: null, result };
    }
    // `dead` counts a delivery's death through its retry schedule, once: the scheduled attempt that used
    // the schedule up. A failed manual retry of a dead delivery, a recovered dead delivery failing again
    // and a failed test event (the merchant checking an endpoint, often one not up yet; also left out of
    // the dead gauge, store-metrics) are merchant actions, not events lost: they are not counted at all,
    // so no key with webhooks:write can fire the operator's dead-deliveries alert. Delivered and retrying
    // attempts count whatever their trigger.
    if (outcome.status !== 'dead' || usedUpSchedule) this.attempts.inc({ status: outcome.status });
    // Never the body, the URL or the secret: ids, type, outcome and the failure's own text ("HTTP 500",
    // "request failed: ECONNREFUSED", "no response within …"). A death through the schedule is the
    // operator's to review (interface.md: "marked dead for manual review"), so it is a warning naming the
    // merchant and why; a merchant's own retry or test event failing again is not.
    const line = {
      deliveryId: leased.id, merchantId: leased.merchantId, eventType: leased.eventType, attempt: attemptNumber, trigger,
      responseStatus: result.responseStatus, status: outcome.status, ...(result.ok ? {} : { reason: result.error }),
    };
    if (outcome.status === 'dead' && usedUpSchedule) this.logger.warn(line, 'webhook delivery dead: its retry schedule is used up');
    else if (endedUnregistered) this.logger.info(line, 'webhook attempt failed; delivery ended: the merchant has no webhook URL');
    else this.logger.info(line, result.ok ? 'webhook delivered' : 'webhook attempt failed');
    return { outcome, result };
  }

  private async recordDelivered(record: DeliveredAttempt): Promise<AttemptOutcome | null> {
    return (await this.delivered.add(record)) ? { status: 'delivered', nextAttemptAt: null } : null;
  }

  /**
   * Decrypts a sealed secret once per process: keyed by the ciphertext, which changes whenever the secret
   * does (a fresh IV each time), so a rotated secret is never answered from here — nothing to invalidate.
   */
  private openSecret(sealed: string | null): string | null {
    if (!sealed) return null;
    let secret = this.openedSecrets.get(sealed);
    if (secret === undefined) {
      secret = this.merchants.openWebhookSecret(sealed)!;
      setBounded(this.openedSecrets, sealed, secret, OPENED_SECRETS_MAX);
    }
    return secret;
  }

  /**
   * Checks the URL's shape and the secret, then POSTs (the sender then owns `slot`); anything that stops
   * the request is a failed attempt. No DNS lookup here, outside the request's timeout: the sender applies the address policy
   * to an address literal and, through its guarded lookup, to every address it connects to.
   */
  private async send(leased: LeasedDelivery, url: string, openedSecret?: string | null, slot?: RequestSlot): Promise<SendResult> {
    // The sender releases the slot once the connection is free; a request refused here never had one.
    const refused = (error: string): SendResult => {
      slot?.release();
      return { ok: false, responseStatus: null, error: capError(error), durationMs: 0 };
    };
    let secret: string | null;
    try {
      assertUrlShape(url, this.config.allowPrivateUrls);
      secret = openedSecret !== undefined ? openedSecret : this.openSecret(leased.sealedSecret);
    } catch (err) {
      if (err instanceof DomainError) return refused(`URL refused: ${err.details?.[0]?.issue ?? err.message}`);
      // A manual retry or test event (scheduled attempts never get here with it: attemptLeased gives them back).
      if (err instanceof SecretUnreadableError) {
        this.logger.error({ deliveryId: leased.id, reason: err.message }, "webhook not sent: the merchant's signing secret cannot be opened with ENCRYPTION_KEY or DECRYPTION_KEYS");
        return refused('not sent: the service cannot open the webhook signing secret right now (its encryption key configuration, not your endpoint); try again later');
      }
      this.logger.error({ deliveryId: leased.id, err: { type: (err as Error).name, message: (err as Error).message } }, 'webhook attempt could not be prepared');
      return refused('internal error while preparing the request');
    }
    if (!secret) return refused('the merchant has no webhook signing secret');
    // The database's time (see LeasedDelivery.databaseClockOffsetMs), not this host's.
    const timestamp = Math.floor((Date.now() + leased.databaseClockOffsetMs) / 1000);
    return this.sender.send({
      merchantId: leased.merchantId,
      ...(slot ? { slot } : {}),
      url,
      body: leased.body,
      timeoutMs: this.config.timeoutMs,
      allowPrivate: this.config.allowPrivateUrls,
      headers: {
        'Content-Type': 'application/json',
        'User-Agent': USER_AGENT,
        ...signatureHeaders(secret, leased.id, leased.eventType, timestamp, leased.body),
      },
    });
  }
}
