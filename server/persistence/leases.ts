import { randomUUID } from 'node:crypto';
import type { EntityManager } from '@mikro-orm/postgresql';

type Knex = ReturnType<EntityManager['getKnex']>;

/**
 * Short leases (table `refresh_leases`): "one at a time across every process" around a call to another
 * system. A lease is a row with an expiry, taken by one INSERT … ON CONFLICT, never a lock or an open
 * transaction, which would pin a pooled connection — for the holder and every waiter — while the other
 * system answers. A holder that dies leaves a row that expires. For short database-only critical
 * sections, KeyLock (advisory locks) is the tool.
 */
export class Leases {
  constructor(private readonly knex: Knex) {}

  /** Takes `name` for `ms` unless another holder's lease on it is still running: its holder id, or null. */
  async take(name: string, ms: number): Promise<string | null> {
    const holder = randomUUID();
    const taken = (await this.knex.raw(
      `INSERT INTO refresh_leases (name, holder, until) VALUES (?, ?, now() + make_interval(secs => ?))
       ON CONFLICT (name) DO UPDATE SET holder = EXCLUDED.holder, until = EXCLUDED.until WHERE refresh_leases.until < now()
       RETURNING holder`,
      [name, holder, ms / 1000],
    )) as { rows: unknown[] };
    return taken.rows.length === 1 ? holder : null;
  }

  /** Extends `holder`'s lease on `name` to `ms` from now; false when it has expired and was taken by another. */
  async renew(name: string, holder: string, ms: number): Promise<boolean> {
    const renewed = (await this.knex.raw(
      'UPDATE refresh_leases SET until = now() + make_interval(secs => ?) WHERE name = ? AND holder = ? RETURNING holder',
      [ms / 1000, name, holder],
    )) as { rows: unknown[] };
    return renewed.rows.length === 1;
  }

  /** Gives the lease back (nothing when it is no longer `holder`'s); never throws: an unreleased lease expires. */
  async release(name: string, holder: string): Promise<void> {
    await this.knex.raw('DELETE FROM refresh_leases WHERE name = ? AND holder = ?', [name, holder]).catch(() => undefined);
  }
}
