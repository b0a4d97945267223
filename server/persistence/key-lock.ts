import pg from 'pg';
import { PG_SOCKET_OPTIONS } from '../lib/pg-connection.js';

export class LockTimeoutError extends Error {}

/** Back-off between tries while another request holds the key: short at first, at most this. */
const MAX_RETRY_DELAY_MS = 100;

/**
 * Session-level PostgreSQL advisory locks on a small dedicated pool, for short database-only critical
 * sections across every process (per-merchant job scheduling). Never hold one across a call to another
 * system: idempotency keys use leases instead (domain/payments/idempotency-keys.ts).
 *
 * Only the holder keeps a connection: waiters try (`pg_try_advisory_lock`) and give their connection
 * back between tries. Blocking in `pg_advisory_lock` would pin one connection per waiting request, so
 * a burst of retries on one key could exhaust the database's connections for everyone.
 */
export class KeyLock {
  private readonly pool: pg.Pool;

  constructor(databaseUrl: string, max = 40) {
    this.pool = new pg.Pool({ connectionString: databaseUrl, ...PG_SOCKET_OPTIONS, max, idleTimeoutMillis: 10_000 });
    this.pool.on('error', () => undefined);
  }

  /** Runs `fn` holding the lock for `key`; waits at most `waitMs` for it, else LockTimeoutError. */
  async withLock<T>(key: string, waitMs: number, fn: () => Promise<T>): Promise<T> {
    const deadline = Date.now() + waitMs;
    let delay = 5;
    for (;;) {
      // A pool that cannot give a connection throws its own error: capacity, not lock contention.
      const client = await this.pool.connect();
      let locked = false;
      let broken = false;
      try {
        const { rows } = await client
          .query<{ ok: boolean }>('SELECT pg_try_advisory_lock(hashtextextended($1, 0)) AS ok', [key])
          .catch((err: Error) => {
            broken = true;
            throw err;
          });
        locked = rows[0]?.ok === true;
        if (locked) return await fn();
      } finally {
        if (locked) {
          await client.query('SELECT pg_advisory_unlock(hashtextextended($1, 0))', [key]).catch(() => (broken = true));
        }
        // A connection that may still hold the lock is closed (which releases it), never pooled.
        client.release(broken);
      }
      const left = deadline - Date.now();
      if (left <= 0) throw new LockTimeoutError('lock wait timed out');
      await new Promise((r) => setTimeout(r, Math.min(left, delay * (0.5 + Math.random()))));
      delay = Math.min(delay * 2, MAX_RETRY_DELAY_MS);
    }
  }

  async close(): Promise<void> {
    await this.pool.end();
  }
}
