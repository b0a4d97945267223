import pg from 'pg';
import type { Logger } from '../observability/logger.js';

/**
 * The channel the database NOTIFYs when a delivery becomes due now: at the commit of a new outbox row
 * or of a delivery put back in the queue (migration 20261123001301), and by the sweeper.
 */
export const DELIVERIES_DUE_CHANNEL = 'webhook_deliveries_due';

/** Wait before reconnecting a lost LISTEN connection. */
const RECONNECT_MS = 1000;

/**
 * A worker's own connection LISTENing on DELIVERIES_DUE_CHANNEL (outside the pools: a LISTEN lives
 * on one session). `onDue` runs for every notification and after every (re)connect, since a
 * notification sent while nobody listened is gone: the worker then looks for due deliveries anyway.
 * A dropped connection is reconnected; TCP keep-alive notices a connection that died silently.
 * Written here rather than taken from `pg-listen`, whose last release is from 2020: this is all of it.
 */
export class DeliveryListener {
  private client: pg.Client | null = null;
  private retry: NodeJS.Timeout | null = null;
  private stopped = false;

  constructor(
    private readonly databaseUrl: string,
    private readonly onDue: () => void,
    private readonly logger: Logger,
  ) {}

  /** Resolves once listening, or after the first failed try (it keeps retrying in the background). */
  start(): Promise<void> {
    return this.connect();
  }

  async stop(): Promise<void> {
    this.stopped = true;
    if (this.retry) clearTimeout(this.retry);
    const client = this.client;
    this.client = null;
    await client?.end().catch(() => undefined);
  }

  private async connect(): Promise<void> {
    this.retry = null;
    if (this.stopped) return;
    const client = new pg.Client({ connectionString: this.databaseUrl, keepAlive: true, application_name: 'payments-delivery-listener' });
    this.client = client;
    client.on('notification', () => this.onDue());
    client.on('error', (err) => this.lost(client, err));
    client.on('end', () => this.lost(client, null));
    try {
      await client.connect();
      await client.query(`LISTEN ${DELIVERIES_DUE_CHANNEL}`);
    } catch (err) {
      this.lost(client, err as Error);
      return;
    }
    this.onDue();
  }

  private lost(client: pg.Client, err: Error | null): void {
    if (this.client !== client) return;
    this.client = null;
    client.end().catch(() => undefined);
    if (this.stopped) return;
    this.logger.warn({ err: err ? { type: err.name, message: err.message } : undefined }, 'webhook delivery listener lost its connection; reconnecting');
    this.retry = setTimeout(() => void this.connect(), RECONNECT_MS);
  }
}
