import { createHash, randomUUID } from 'node:crypto';
import type { EntityManager } from '@mikro-orm/postgresql';
import type { ErrorCode } from '../../../contract/index.js';
import { DomainError, OutcomeNotRecordedError, OutcomeUnknownError, afterProviderMayHaveActed, conflict, stillRunning, type FieldIssue } from '../errors.js';
import type { CompanionWrite, StatusWriter, UnitOfWork } from './status-writer.js';

/**
 * Idempotency keys after Brandur Leach's "Implementing Stripe-like Idempotency Keys in Postgres":
 *
 * - **Atomic claim.** `INSERT … ON CONFLICT DO NOTHING` in the same short transaction that reserves the
 *   resource (the pending payment, the pending refund, …): the key and the reservation exist together
 *   or not at all, and exactly one request wins.
 * - **A lease, not a lock.** The winner holds `locked_until`, a timestamp, not a database lock or a
 *   pooled connection: every connection goes back to the pool before the provider is called.
 * - **Recovery point.** `provider_call` means "call the provider (again) with the idempotency key derived
 *   from `resource_id`"; `finished` means the answer is committed. A request that died mid-way leaves
 *   its lease to expire; the next request with the key takes the lease over and resumes from there,
 *   so the provider sees the same idempotency key and never charges twice.
 *
 * Another request with the key waits for the holder by polling the row (giving its connection back
 * between polls), up to WAIT_MS (decisions.md: 10 s), then 409.
 */

export type IdempotencyScope = 'payment.create' | 'payment.capture' | 'refund.create' | 'card.create';
export type RecoveryPoint = 'provider_call' | 'finished';

type StoredError = { code: ErrorCode; message: string; details?: FieldIssue[] };
/**
 * The first answer, kept so that a replay gives the same one. `undecided`: the first request ended with
 * that error while the provider's outcome was unknown (OutcomeUnknownError); a replay gives it again only
 * while the resource is still unsettled, and the resource with `status` once it is settled.
 */
export type StoredAnswer = { status: number } | { error: StoredError } | { status: number; undecided: StoredError };

export interface IdempotentRequest {
  scope: IdempotencyScope;
  merchantId: string;
  key: string;
  /** Hash of the normalised request: the same key with another body is a conflict. */
  requestHash: string;
  /** Hashes an earlier release computed for this same request: a key it stored still matches. */
  formerHashes?: readonly string[];
}

export interface ClaimedKey {
  id: string;
  resourceId: string;
  leaseToken: string;
  /**
   * True when this request took over the lease of one that died or gave up mid-way. Its answer is still
   * a first answer (no Idempotent-Replayed): the key held none, and no earlier request was answered with it.
   */
  resumed: boolean;
}

export type Acquired =
  | { state: 'claimed'; claim: ClaimedKey }
  | { state: 'finished'; resourceId: string; answer: StoredAnswer };

interface KeyRow {
  id: string;
  merchant_id: string;
  request_hash: string;
  recovery_point: RecoveryPoint;
  resource_id: string;
  answer: StoredAnswer | null;
  lease_token: string | null;
}

/** decisions.md: a concurrent request with the same key waits at most this long for the first. */
export const WAIT_MS = 10_000;
const MAX_POLL_MS = 200;

/** The atomic claim. Blocks only while another claim of this key is committing (a few milliseconds), never across a provider call. */
const CLAIM_SQL = `INSERT INTO idempotency_keys (scope, key, merchant_id, request_hash, recovery_point, resource_id, lease_token, locked_until)
  VALUES (?, ?, ?, ?, 'provider_call', ?, ?, now() + make_interval(secs => ?))
  ON CONFLICT (scope, key) DO NOTHING RETURNING id`;

/** The claim statement with its parameters, for `acquireInOneStatement`. */
export interface KeyClaimStatement {
  sql: string;
  params: unknown[];
}

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

/** SHA-256 of a request's fields (keys sorted; undefined omitted), for comparing a retry's body with the first. */
export function hashRequest(fields: Record<string, string | number | null | undefined>): string {
  const canonical = Object.keys(fields).sort().filter((k) => fields[k] !== undefined).map((k) => [k, fields[k]]);
  return createHash('sha256').update(JSON.stringify(canonical)).digest('hex');
}

/** The steps of an action run under an Idempotency-Key (see `IdempotencyKeys.run`). */
export interface IdempotentAction<T> {
  /** Validates and reserves inside the claiming transaction; returns the id the provider keys derive from. Throwing claims nothing. */
  reserve(uow: UnitOfWork): Promise<string>;
  /**
   * The provider call(s) and the commit of their answer; `resumed` when a dead request's claim was taken over.
   * A failure of ours once the provider may have acted is thrown as an OutcomeNotRecordedError
   * (afterProviderMayHaveActed: 500 with Payments-Outcome: unknown), which releases the key like any unexpected error.
   */
  act(resourceId: string, resumed: boolean): Promise<T>;
  /** The resource as it is now, for a replay. */
  load(resourceId: string): Promise<T>;
  /** Errors after which nothing happened anywhere (e.g. the buyer has not approved yet): the key is freed, not answered. */
  nothingDone?(err: DomainError): boolean;
  /**
   * Whether the resource (as `load` returns it) has an outcome a replay can answer: after an
   * OutcomeUnknownError the key replays that error until this is true. Without it the error is replayed.
   */
  settled?(value: T): boolean;
  /**
   * Errors after which the action is to be resumed rather than answered: nothing about it is final yet
   * (the provider did not answer, or refused before acting, e.g. rate-limited). The key keeps no answer
   * and its lease is released, so the next request with the key resumes the action at once (`act` with
   * `resumed`), repeating the very provider request. Takes precedence over OutcomeUnknownError's `undecided`.
   */
  resumable?(err: DomainError): boolean;
}

export class IdempotencyKeys {
  constructor(
    private readonly em: EntityManager,
    /** Claims run as the status writer's unit of work, so a reservation may move statuses too. */
    private readonly writer: StatusWriter,
    /** How long a claim stays exclusive; longer than any provider call (see config IDEMPOTENCY_LEASE). */
    private readonly leaseMs: number,
  ) {}

  /**
   * Claims `request`'s key, or finds its finished answer, or takes over an expired lease. `reserve`
   * runs inside the claiming transaction (only when the key is new) and returns the id of what it
   * reserved; if it throws, nothing is claimed and the error is the answer (validation happens there).
   */
  async acquire(request: IdempotentRequest, reserve: (uow: UnitOfWork) => Promise<string>): Promise<Acquired> {
    return this.acquireWith(request, () => this.claim(request, reserve));
  }

  /**
   * `acquire` for a caller that writes its reservation in the same statement as the claim (one round
   * trip, no transaction block): `write` runs `claim.sql` as a CTE named `claim` (it returns the key's
   * `id` when the key was new, no row otherwise), inserts what it reserves FROM claim, and answers the
   * key's id, or null when the claim took nothing.
   */
  async acquireInOneStatement(request: IdempotentRequest, resourceId: string, write: (claim: KeyClaimStatement) => Promise<string | null>): Promise<Acquired> {
    return this.acquireWith(request, async () => {
      const leaseToken = randomUUID();
      const id = await write({ sql: CLAIM_SQL, params: this.claimParams(request, resourceId, leaseToken) });
      return id ? { id, resourceId, leaseToken, resumed: false } : null;
    });
  }

  private async acquireWith(request: IdempotentRequest, claim: () => Promise<ClaimedKey | null>): Promise<Acquired> {
    const deadline = Date.now() + WAIT_MS;
    let delay = 10;
    let tryInsert = true;
    for (;;) {
      if (tryInsert) {
        const claimed = await claim();
        if (claimed) return { state: 'claimed', claim: claimed };
      }
      const row = await this.find(request);
      if (!row) {
        // The holder gave the key up (nothing had happened): claim it afresh.
        tryInsert = true;
        continue;
      }
      tryInsert = false;
      const finished = IdempotencyKeys.judge(row, request);
      if (finished) return finished;
      const taken = await this.takeOver(row.id);
      if (taken) return { state: 'claimed', claim: { id: row.id, resourceId: row.resource_id, leaseToken: taken, resumed: true } };
      const left = deadline - Date.now();
      // Retry-After marks this conflict as passing (clients retry it with the same key), unlike every other 409.
      if (left <= 0) throw stillRunning('A request with this Idempotency-Key is still being processed; retry shortly');
      await sleep(Math.min(left, delay * (0.5 + Math.random())));
      delay = Math.min(delay * 2, MAX_POLL_MS);
    }
  }

  /** A used key's verdict on `request`: 409 for another merchant or body; its answer once finished. */
  private static judge(row: KeyRow, request: IdempotentRequest): Extract<Acquired, { state: 'finished' }> | null {
    if (row.merchant_id !== request.merchantId) throw conflict('This Idempotency-Key has already been used');
    if (row.request_hash !== request.requestHash && !request.formerHashes?.includes(row.request_hash)) throw conflict('This Idempotency-Key was already used with a different request body');
    return row.recovery_point === 'finished' ? { state: 'finished', resourceId: row.resource_id, answer: row.answer ?? { status: 200 } } : null;
  }

  /**
   * Runs `action` once per key: the first request's answer — its success status, or the DomainError it
   * ended with — is stored and replayed to every later request with the key (marked Idempotent-Replayed),
   * and the action never runs twice. `replayed` is true only for such a stored answer: a request that did
   * the action — a new claim, or a takeover that resumed what an earlier request left unfinished (whatever
   * it found done) — answers as a first request, since no request was answered with its outcome before. An OutcomeUnknownError is replayed only until the resource is
   * settled (`action.settled`); from then on the resource is the answer, with the success status. An unexpected
   * error, an OutcomeNotRecordedError, or one the action calls resumable (`action.resumable`), releases the lease so
   * a retry resumes at once; so does a failure to store the answer of an action done, answered as an unknown outcome.
   */
  async run<T>(request: IdempotentRequest, status: number, action: IdempotentAction<T>): Promise<{ value: T; replayed: boolean }> {
    return this.runAction(request, status, action, true);
  }

  private async runAction<T>(request: IdempotentRequest, status: number, action: IdempotentAction<T>, mayReopen: boolean): Promise<{ value: T; replayed: boolean }> {
    const acquired = await this.acquire(request, (uow) => action.reserve(uow));
    if (acquired.state === 'finished') {
      const { answer } = acquired;
      if ('undecided' in answer) {
        // The first answer was "outcome unknown": the resource as it is now answers, once it is settled.
        const value = await action.load(acquired.resourceId);
        if (action.settled?.(value)) return { value, replayed: true };
        const undecided = new OutcomeUnknownError(answer.undecided.code, answer.undecided.message, { 'Idempotent-Replayed': 'true' });
        // Stored by a version (or a process not yet upgraded) that kept such an answer for an action now
        // resumed instead: the key is reopened once, and this request resumes the action like any other.
        if (mayReopen && action.resumable?.(new OutcomeUnknownError(answer.undecided.code, answer.undecided.message))) {
          // (If another request reopened it first, this one waits for it, as for any claim in progress.)
          await this.reopen(request);
          return this.runAction(request, status, action, false);
        }
        throw undecided;
      }
      const replayedError = IdempotencyKeys.replayError(answer);
      if (replayedError) throw replayedError;
      return { value: await action.load(acquired.resourceId), replayed: true };
    }
    const { claim } = acquired;
    let value: T;
    try {
      value = await this.holding(claim, () => action.act(claim.resourceId, claim.resumed));
    } catch (err) {
      try {
        if (err instanceof OutcomeNotRecordedError || !(err instanceof DomainError)) await this.release(claim);
        else if (action.nothingDone?.(err)) await this.forget(claim);
        else if (action.resumable?.(err)) await this.release(claim);
        else if (err instanceof OutcomeUnknownError) await this.finish(claim, { status, undecided: IdempotencyKeys.storedError(err) });
        else await this.finish(claim, { error: IdempotencyKeys.storedError(err) });
      } catch {
        // The answer stands: the claim's lease runs out, and the next request with the key resumes the action.
      }
      throw err;
    }
    try {
      await this.finish(claim, { status });
    } catch (err) {
      // The action is done, its answer not stored with the key (no connection free): not the 503 "nothing
      // was done" but an unknown outcome; the lease is released, and a retry resumes the action, which
      // finds it done and answers it.
      await this.release(claim).catch(() => undefined);
      throw afterProviderMayHaveActed(err);
    }
    // Not a replay, even for a takeover: the key held no answer, so no earlier request was answered with
    // this outcome (a request answers success only once its key is finished), and the merchant may act on it.
    return { value, replayed: false };
  }

  /**
   * Runs `work` (the provider calls of a claim) renewing the claim's lease every third of its length, so
   * a live request is never taken over however many provider requests its path makes (a token fetch or
   * wait, a 401's repeat, a follow-up read — several PROVIDER_TIMEOUT_MS in all). A dead process renews
   * nothing: its lease runs out as before. A renewal that finds the lease gone stops renewing.
   */
  async holding<T>(claim: ClaimedKey, work: () => Promise<T>): Promise<T> {
    let renewing: Promise<unknown> = Promise.resolve();
    const timer = setInterval(() => {
      renewing = this.renew(claim)
        .then((held) => {
          if (!held) clearInterval(timer);
        })
        .catch(() => undefined);
    }, Math.max(200, Math.floor(this.leaseMs / 3)));
    timer.unref();
    try {
      return await work();
    } finally {
      clearInterval(timer);
      await renewing;
    }
  }

  /** Extends the lease by its full length from now; false when it is no longer this claim's. */
  private async renew(claim: ClaimedKey): Promise<boolean> {
    const rows = await this.em.fork().execute<{ id: string }[]>(
      `UPDATE idempotency_keys SET locked_until = now() + make_interval(secs => ?)
       WHERE id = ? AND lease_token = ? AND recovery_point <> 'finished' RETURNING id`,
      [this.leaseMs / 1000, claim.id, claim.leaseToken],
    );
    return rows.length === 1;
  }

  /** Records the answer; the key replays it from now on. Returns false if the lease was lost meanwhile. */
  async finish(claim: ClaimedKey, answer: StoredAnswer, tx: EntityManager = this.em.fork()): Promise<boolean> {
    const finishing = this.finishing(claim, answer);
    const rows = await tx.execute<{ id: string }[]>(finishing.sql('true'), finishing.params, 'all');
    return rows.length === 1;
  }

  /** `finish` as a write that commits with another (the status writer's creation answer, in its statement). */
  finishing(claim: ClaimedKey, answer: StoredAnswer): CompanionWrite {
    return {
      sql: (when) => `UPDATE idempotency_keys SET recovery_point = 'finished', answer = ?::jsonb, lease_token = NULL, locked_until = NULL, updated_at = now()
       WHERE id = ? AND lease_token = ? AND (${when}) RETURNING id`,
      params: [JSON.stringify(answer), claim.id, claim.leaseToken],
    };
  }

  /** Ends the lease without an answer: the next request with the key resumes at once (unexpected error). */
  async release(claim: ClaimedKey): Promise<void> {
    await this.em.fork().execute(
      'UPDATE idempotency_keys SET lease_token = NULL, locked_until = NULL, updated_at = now() WHERE id = ? AND lease_token = ?',
      [claim.id, claim.leaseToken],
    );
  }

  /** Turns a key finished with an `undecided` answer back into an unfinished claim nobody holds (no-op when another request did first). */
  private async reopen(request: IdempotentRequest): Promise<void> {
    await this.em.fork().execute(
      `UPDATE idempotency_keys SET recovery_point = 'provider_call', answer = NULL, lease_token = NULL, locked_until = NULL, updated_at = now()
       WHERE scope = ? AND key = ? AND merchant_id = ? AND recovery_point = 'finished' AND answer -> 'undecided' IS NOT NULL`,
      [request.scope, request.key, request.merchantId],
    );
  }

  /** Deletes a claim whose action did not happen at all (nothing reserved, nothing sent): the key is free again. */
  async forget(claim: ClaimedKey): Promise<void> {
    await this.em.fork().execute('DELETE FROM idempotency_keys WHERE id = ? AND lease_token = ?', [claim.id, claim.leaseToken]);
  }

  private static storedError(err: DomainError): StoredError {
    return { code: err.code, message: err.message, ...(err.details ? { details: err.details } : {}) };
  }

  /** The replay of a stored error answer, marked as a replay. */
  static replayError(answer: StoredAnswer): DomainError | null {
    if (!('error' in answer)) return null;
    return new DomainError(answer.error.code, answer.error.message, answer.error.details, { 'Idempotent-Replayed': 'true' });
  }

  private async claim(request: IdempotentRequest, reserve: (uow: UnitOfWork) => Promise<string>): Promise<ClaimedKey | null> {
    const leaseToken = randomUUID();
    return this.writer.commit(async (uow) => {
      const tx = uow.tx;
      const placeholder = randomUUID();
      const rows = await tx.execute<{ id: string }[]>(CLAIM_SQL, this.claimParams(request, placeholder, leaseToken), 'all');
      const id = rows[0]?.id;
      if (!id) return null;
      const resourceId = await reserve(uow);
      await tx.execute('UPDATE idempotency_keys SET resource_id = ? WHERE id = ?', [resourceId, id], 'run');
      return { id, resourceId, leaseToken, resumed: false };
    });
  }

  private claimParams(request: IdempotentRequest, resourceId: string, leaseToken: string): unknown[] {
    return [request.scope, request.key, request.merchantId, request.requestHash, resourceId, leaseToken, this.leaseMs / 1000];
  }

  private async find(request: IdempotentRequest): Promise<KeyRow | null> {
    const rows = await this.em.fork().execute<KeyRow[]>(
      'SELECT id, merchant_id, request_hash, recovery_point, resource_id, answer, lease_token FROM idempotency_keys WHERE scope = ? AND key = ?',
      [request.scope, request.key],
    );
    return rows[0] ?? null;
  }

  /** Takes the lease of an unfinished key whose holder died or gave up; returns the new lease token. */
  private async takeOver(id: string): Promise<string | null> {
    const leaseToken = randomUUID();
    const rows = await this.em.fork().execute<{ id: string }[]>(
      `UPDATE idempotency_keys SET lease_token = ?, locked_until = now() + make_interval(secs => ?), updated_at = now()
       WHERE id = ? AND recovery_point <> 'finished' AND (locked_until IS NULL OR locked_until < now())
       RETURNING id`,
      [leaseToken, this.leaseMs / 1000, id],
    );
    return rows.length === 1 ? leaseToken : null;
  }
}
