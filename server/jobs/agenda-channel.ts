import { BaseNotificationChannel, toJobId, type JobNotification } from 'agenda';
import type pg from 'pg';
import { ChangeNotifications } from '../persistence/change-notifications.js';

/** The channel, and payloads, of @agendajs/postgres-backend's own channel: processes of both kinds wake each other during a deploy. */
export const AGENDA_CHANNEL = 'agenda:jobs';
/**
 * The listening connection is checked this often (a SELECT 1 answered within 2 s): one that died silently
 * is replaced; meanwhile a job due now waits for the next poll instead of starting at once.
 */
const HEARTBEAT_MS = 5_000;

export interface AgendaChannelOptions {
  databaseUrl: string;
  /** Agenda's pool: a NOTIFY is one query on it, its connection given back at once. */
  pool: pg.Pool;
  onError?: (message: string) => void;
  onDeaf?: (message: string) => void;
  /** Called for every query the listening connection sends. */
  onQuery?: () => void;
}

/**
 * Agenda's wake-ups (a job saved due now is started at once by a worker, not at its next poll) on a
 * connection of their own, not one borrowed from Agenda's pool. @agendajs/postgres-backend 3.0.6's channel
 * LISTENs on a pool connection kept for good, and two of its paths never give it back: a LISTEN refused
 * (a hot standby) leaks one connection per attempt, every ~100 ms, until the pool is used up and no job
 * runs again; a stop while it takes a connection after a loss finds nothing to give back, the connection
 * then arrives and closing the pool waits for it for ever. Here the listening connection is a
 * ChangeNotifications (persistence/change-notifications.ts): its own pg.Client, ended on any failure and
 * made again with backoff, checked by heartbeat and by hearing its own NOTIFY, and ended by disconnect()
 * even while it is being made. Nothing of Agenda's pool is held between queries.
 *
 * The channel is 'connected' between Agenda's connect() and disconnect(), whether or not the listening
 * connection is up at the moment: Agenda sends its NOTIFYs only while it is, and they go through the pool,
 * so other processes are woken even while this one's listening connection is being made again. Job state
 * events (Agenda's agenda:jobs:state, re-emitting `complete:<job>` & co. in every process) are not
 * carried: nothing here listens to another process's job events.
 */
export class AgendaNotificationChannel extends BaseNotificationChannel {
  private listener: ChangeNotifications | null = null;

  constructor(private readonly options: AgendaChannelOptions) {
    super({ channelName: AGENDA_CHANNEL, reconnect: { enabled: false } });
    // A subscriber's failure: reported, never an unhandled 'error' event.
    this.on('error', (err: Error) => options.onError?.(`agenda wake-up: ${err.message}`));
  }

  async connect(): Promise<void> {
    if (this.listener) return;
    const listener = new ChangeNotifications(this.options.databaseUrl, {
      channel: this.config.channelName,
      name: 'payments-agenda-listener',
      heartbeatIntervalMs: HEARTBEAT_MS,
      onPayload: (payload) => this.received(payload),
      onError: this.options.onError,
      onDeaf: this.options.onDeaf,
      onQuery: this.options.onQuery,
    });
    this.listener = listener;
    this.setState('connected');
    // Resolves once listening, or once the first attempt failed (retried in the background).
    await listener.start();
  }

  async disconnect(): Promise<void> {
    const listener = this.listener;
    this.listener = null;
    this.handlers.clear();
    this.stateHandlers.clear();
    this.setState('disconnected');
    await listener?.stop();
  }

  /**
   * A wake-up that cannot be sent is not the save's failure (Agenda would report it as an 'error' event,
   * which nothing handles): the job is saved, and a worker's next poll takes it.
   */
  async publish(notification: JobNotification): Promise<void> {
    const payload = JSON.stringify({
      jobId: notification.jobId,
      jobName: notification.jobName,
      nextRunAt: notification.nextRunAt?.toISOString() ?? null,
      priority: notification.priority,
      timestamp: notification.timestamp.toISOString(),
      source: notification.source,
    });
    try {
      await this.options.pool.query('SELECT pg_notify($1, $2)', [this.config.channelName, payload]);
    } catch (err) {
      this.options.onError?.(`agenda wake-up for ${notification.jobName} not sent (${(err as Error).message}): workers take the job at their next poll`);
    }
  }

  private received(payload: string): void {
    let notification: JobNotification;
    try {
      const data = JSON.parse(payload) as { jobId: string; jobName: string; nextRunAt: string | null; priority: number; timestamp: string; source?: string };
      if (typeof data.jobName !== 'string' || typeof data.jobId !== 'string') return;
      notification = {
        jobId: toJobId(data.jobId),
        jobName: data.jobName,
        nextRunAt: data.nextRunAt ? new Date(data.nextRunAt) : null,
        priority: data.priority,
        timestamp: new Date(data.timestamp),
        source: data.source,
      };
    } catch {
      return;
    }
    void this.notifyHandlers(notification).catch((err: Error) => this.emit('error', err));
  }
}
