import pg from 'pg';

export class LockTimeoutError extends Error {}

/**
 * Session-level PostgreSQL advisory locks on a small dedicated pool, so a lock held during a provider
 * call never competes with the ORM's connections. Works across every process on the database: this is
 * how concurrent requests with one Idempotency-Key wait for the first instead of calling the provider.
 */
export class KeyLock {
  private readonly pool: pg.Pool;

  constructor(databaseUrl: string, max = 40) {
    this.pool = new pg.Pool({ connectionString: databaseUrl, max, idleTimeoutMillis: 10_000, connectionTimeoutMillis: 10_000 });
    this.pool.on('error', () => undefined);
  }

  /** Runs `fn` holding the lock for `key`; waits at most `waitMs` for it, else LockTimeoutError. */
  async withLock<T>(key: string, waitMs: number, fn: () => Promise<T>): Promise<T> {
    const started = Date.now();
    const client = await this.pool.connect().catch((err: Error) => {
      throw new LockTimeoutError(`lock pool unavailable: ${err.message}`);
    });
    let locked = false;
    try {
      const remaining = Math.max(1, waitMs - (Date.now() - started));
      await client.query(`SET lock_timeout = ${Math.floor(remaining)}`);
      try {
        await client.query('SELECT pg_advisory_lock(hashtextextended($1, 0))', [key]);
      } catch (err) {
        if ((err as { code?: string }).code === '55P03') throw new LockTimeoutError('lock wait timed out');
        throw err;
      }
      locked = true;
      await client.query('SET lock_timeout = 0');
      return await fn();
    } finally {
      if (locked) await client.query('SELECT pg_advisory_unlock(hashtextextended($1, 0))', [key]).catch(() => undefined);
      client.release();
    }
  }

  async close(): Promise<void> {
    await this.pool.end();
  }
}
