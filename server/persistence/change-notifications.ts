import { randomUUID } from 'node:crypto';
import pg from 'pg';
import { PG_SOCKET_OPTIONS } from '../lib/pg-connection.js';

/** A committed change to a table another process may have cached; no merchant ids means everything. */
export interface TableChange {
  table: string;
  merchantIds: string[];
}

export interface ChangeFeed {
  /**
   * True while every change committed more than `freshnessMs` ago is known to have reached this
   * process: the listening connection is up and answered a query sent within that time.
   */
  isCurrent(): boolean;
  /** Called with every change, and with a change naming no merchant when the connection was (re)made. */
  subscribe(listener: (change: TableChange) => void): void;
}

export interface ChangeNotificationOptions {
  channel: string;
  /** How old the last confirmed round trip may be for cached entries to be served. */
  freshnessMs?: number;
  /** A check unanswered this long means the connection is dead: it is closed and made again. */
  heartbeatTimeoutMs?: number;
  /**
   * Also check the connection this often, whether or not anything reads `isCurrent()`. A listener that
   * only reacts to notifications (the delivery drain loop) needs it: a connection that died silently
   * (half-open TCP after a NAT idle timeout or a hard failover) otherwise goes unnoticed for hours,
   * and every notification meant for it is lost.
   */
  heartbeatIntervalMs?: number;
  /** Connecting and LISTENing taking longer than this are given up and tried again. */
  connectTimeoutMs?: number;
  /** The connection's application_name is `<name>:<pid>` (how operators and tests find it in pg_stat_activity). */
  name?: string;
  onError?: (message: string) => void;
  /**
   * Called when the connection did not hear a NOTIFY it sent itself within 5 s of its LISTEN: it is not
   * a session of its own (DATABASE_URL goes through a pooler in transaction mode), so no change reaches it.
   */
  onDeaf?: (message: string) => void;
  /** Called for every query the listening connection sends (LISTEN and heartbeats). */
  onQuery?: () => void;
  /**
   * For a channel whose payloads are not table changes (Agenda's wake-ups, jobs/agenda-channel.ts): each
   * notification's payload goes here instead of to the subscribers (self-checks excepted).
   */
  onPayload?: (payload: string) => void;
}

const MAX_RECONNECT_DELAY_MS = 5_000;
/** How long a new LISTEN may take to hear its own NOTIFY. */
const SELF_CHECK_MS = 5_000;
/** The table the self-check's payload names: no subscriber is told of it, in any process. */
const SELF_CHECK_TABLE = '_listen_self_check';

/**
 * One dedicated PostgreSQL connection per process that LISTENs on a channel fed by triggers
 * (migration 20261123001101). Not a pooled connection: a LISTEN belongs to its session.
 *
 * Freshness: PostgreSQL delivers to a session every notification committed before a query it runs
 * before that query's answer, so an answered heartbeat sent at time S proves that nothing committed
 * before S is missing. `isCurrent()` holds only within `freshnessMs` of such an S; callers then go to the
 * database instead of their cache. A (re)connect LISTENs again and tells every subscriber to drop
 * everything, since notifications sent while it was down are lost.
 */
export class ChangeNotifications implements ChangeFeed {
  /** The listening connection once it LISTENs; `connecting` until then. */
  private client: pg.Client | null = null;
  private connecting: pg.Client | null = null;
  private readonly listeners: ((change: TableChange) => void)[] = [];
  /**
   * When the last answered query was sent, on the monotonic clock (performance.now()): a wall clock stepped
   * back (NTP, a VM resumed) would make it look younger than it is — current, and no heartbeat sent.
   * -Infinity: none on this connection.
   */
  private confirmedAt = -Infinity;
  /** The connection a heartbeat is awaited on (at most one at a time). */
  private heartbeatOn: pg.Client | null = null;
  private reconnectTimer: NodeJS.Timeout | null = null;
  private heartbeatTimer: NodeJS.Timeout | null = null;
  private reconnectDelayMs = 100;
  /** Self-checks sent and not heard yet, by their id. */
  private readonly selfChecks = new Map<string, NodeJS.Timeout>();
  private stopped = false;
  private readonly freshnessMs: number;
  private readonly heartbeatTimeoutMs: number;
  private readonly connectTimeoutMs: number;

  constructor(
    private readonly databaseUrl: string,
    private readonly options: ChangeNotificationOptions,
  ) {
    this.freshnessMs = options.freshnessMs ?? 1_000;
    this.heartbeatTimeoutMs = options.heartbeatTimeoutMs ?? 2_000;
    this.connectTimeoutMs = options.connectTimeoutMs ?? 10_000;
  }

  subscribe(listener: (change: TableChange) => void): void {
    this.listeners.push(listener);
  }

  /**
   * Heartbeats are sent on demand: a read that finds the last confirmation half its allowed age old
   * asks for a new one, so a busy process checks about twice a second and an idle one not at all
   * (unless `heartbeatIntervalMs` is set).
   */
  isCurrent(): boolean {
    const age = performance.now() - this.confirmedAt;
    if (age >= this.freshnessMs / 2) this.heartbeat();
    return this.client !== null && age < this.freshnessMs;
  }

  /** Connects and LISTENs; a failure is retried in the background (callers read the database meanwhile). */
  async start(): Promise<void> {
    if (this.options.heartbeatIntervalMs && !this.heartbeatTimer) {
      this.heartbeatTimer = setInterval(() => this.heartbeat(), this.options.heartbeatIntervalMs);
      this.heartbeatTimer.unref();
    }
    await this.connect();
  }

  async stop(): Promise<void> {
    this.stopped = true;
    if (this.reconnectTimer) clearTimeout(this.reconnectTimer);
    if (this.heartbeatTimer) clearInterval(this.heartbeatTimer);
    this.heartbeatTimer = null;
    for (const timer of this.selfChecks.values()) clearTimeout(timer);
    this.selfChecks.clear();
    // A connection still being made is ended too, not left to end when its connect completes: once this
    // resolves, the process holds no session for this listener (a stop can close everything else at once).
    const clients = [this.client, this.connecting];
    this.client = null;
    this.connecting = null;
    await Promise.all(clients.map((client) => client?.end().catch(() => undefined)));
  }

  private async connect(): Promise<void> {
    if (this.stopped) return;
    const client = new pg.Client({
      connectionString: this.databaseUrl,
      application_name: `${this.options.name ?? 'payments-change-listener'}:${process.pid}`,
      ...PG_SOCKET_OPTIONS,
      connectionTimeoutMillis: this.connectTimeoutMs,
    });
    client.on('error', (err) => this.lost(client, err.message));
    client.on('end', () => this.lost(client, 'connection ended'));
    client.on('notification', (msg) => {
      if (msg.channel !== this.options.channel) return;
      const change = parseChange(msg.payload);
      if (change.table === SELF_CHECK_TABLE) this.heard(change.check);
      else if (this.options.onPayload) this.options.onPayload(msg.payload ?? '');
      else this.publish(change);
    });
    this.connecting = client;
    // connectionTimeoutMillis bounds the connect only: a LISTEN that never gets an answer would leave
    // this process listening nowhere, with no retry. The whole step is bounded; a late answer is ignored.
    const deadline = setTimeout(() => {
      this.lost(client, `connecting and LISTEN took longer than ${this.connectTimeoutMs} ms`);
      void client.end().catch(() => undefined);
    }, this.connectTimeoutMs);
    deadline.unref();
    try {
      await client.connect();
      const sentAt = performance.now();
      this.options.onQuery?.();
      await client.query(`LISTEN ${pg.escapeIdentifier(this.options.channel)}`);
      clearTimeout(deadline);
      if (this.stopped || this.connecting !== client) {
        await client.end().catch(() => undefined);
        return;
      }
      this.connecting = null;
      this.client = client;
      this.reconnectDelayMs = 100;
      // Whatever was cached before this connection listened may have changed unseen.
      this.publish({ table: '*', merchantIds: [] });
      this.confirmedAt = sentAt;
      this.checkHearsItself(client);
    } catch (err) {
      clearTimeout(deadline);
      // Said before the end, whose 'end' event would otherwise report "connection ended" instead of why
      // (e.g. "cannot execute LISTEN during recovery": a hot standby).
      this.lost(client, (err as Error).message);
      await client.end().catch(() => undefined);
    }
  }

  private lost(client: pg.Client, reason: string): void {
    // Late events of a connection already given up on change nothing.
    if (client !== this.client && client !== this.connecting) return;
    this.client = null;
    this.connecting = null;
    if (this.stopped) return;
    this.options.onError?.(`change notifications (LISTEN ${this.options.channel}): ${reason}; reconnecting`);
    this.confirmedAt = -Infinity;
    this.publish({ table: '*', merchantIds: [] });
    this.reconnectTimer = setTimeout(() => {
      this.reconnectTimer = null;
      void this.connect();
    }, this.reconnectDelayMs);
    this.reconnectTimer.unref();
    this.reconnectDelayMs = Math.min(this.reconnectDelayMs * 2, MAX_RECONNECT_DELAY_MS);
  }

  /**
   * Sends a NOTIFY to the channel and expects it back. On a session of its own PostgreSQL delivers it
   * before the answer; through a transaction-mode pooler the LISTEN stayed on whichever server
   * connection ran it, and nothing comes: said once per connection, then the process carries on (its
   * caches then rely on their 60 s expiry, its drain loop on the sweeper).
   */
  private checkHearsItself(client: pg.Client): void {
    const check = randomUUID();
    const timer = setTimeout(() => {
      this.selfChecks.delete(check);
      if (this.client !== client) return;
      this.options.onDeaf?.(
        `change notifications: LISTEN ${this.options.channel} did not hear its own NOTIFY within ${SELF_CHECK_MS / 1000} s: ` +
          'does DATABASE_URL go through a pooler in transaction mode? LISTEN needs session mode or a direct connection (README, Production: connection poolers)',
      );
    }, SELF_CHECK_MS);
    timer.unref();
    this.selfChecks.set(check, timer);
    this.options.onQuery?.();
    client.query('SELECT pg_notify($1, $2)', [this.options.channel, JSON.stringify({ table: SELF_CHECK_TABLE, check })]).catch(() => undefined);
  }

  private heard(check: string | undefined): void {
    const timer = check === undefined ? undefined : this.selfChecks.get(check);
    if (!timer) return;
    clearTimeout(timer);
    this.selfChecks.delete(check!);
  }

  private heartbeat(): void {
    const client = this.client;
    if (!client || this.heartbeatOn === client) return;
    this.heartbeatOn = client;
    const sentAt = performance.now();
    const timeout = setTimeout(() => {
      // Unanswered: the connection is gone or stuck. It is dropped and made again.
      this.lost(client, 'heartbeat unanswered');
      void client.end().catch(() => undefined);
    }, this.heartbeatTimeoutMs);
    timeout.unref();
    this.options.onQuery?.();
    client
      .query('SELECT 1')
      .then(() => {
        if (this.client === client) this.confirmedAt = Math.max(this.confirmedAt, sentAt);
      })
      .catch(() => undefined)
      .finally(() => {
        clearTimeout(timeout);
        if (this.heartbeatOn === client) this.heartbeatOn = null;
      });
  }

  private publish(change: TableChange): void {
    for (const listener of this.listeners) listener(change);
  }
}

/** A payload this code did not write (or cannot read) is treated as "everything changed". */
function parseChange(payload: string | undefined): TableChange & { check?: string } {
  try {
    const parsed = JSON.parse(payload ?? '') as { table?: unknown; merchant_ids?: unknown; check?: unknown };
    const ids = Array.isArray(parsed.merchant_ids) ? parsed.merchant_ids.filter((id): id is string => typeof id === 'string') : [];
    const check = typeof parsed.check === 'string' ? { check: parsed.check } : {};
    return { table: typeof parsed.table === 'string' ? parsed.table : '*', merchantIds: ids, ...check };
  } catch {
    return { table: '*', merchantIds: [] };
  }
}
