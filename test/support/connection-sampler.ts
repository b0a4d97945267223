import pg from 'pg';

export interface ConnectionPeak {
  /** Most connections open on the database at once (every state). */
  peak: number;
  /** Most of them not idle at once. */
  peakActive: number;
  samples: number;
}

/**
 * Samples the connections every process holds on `databaseUrl`'s database (pg_stat_activity, its own
 * excluded) every `everyMs` until stopped; used by the slow-provider test and benchmark.
 */
export function sampleConnections(databaseUrl: string, everyMs: number): { stop(): Promise<ConnectionPeak> } {
  const client = new pg.Client({ connectionString: databaseUrl });
  let running = true;
  const seen: ConnectionPeak = { peak: 0, peakActive: 0, samples: 0 };
  const loop = (async () => {
    await client.connect();
    while (running) {
      const { rows } = await client.query<{ total: number; active: number }>(
        `SELECT count(*)::int AS total, count(*) FILTER (WHERE state <> 'idle')::int AS active
         FROM pg_stat_activity WHERE datname = current_database() AND pid <> pg_backend_pid()`,
      );
      seen.peak = Math.max(seen.peak, rows[0]!.total);
      seen.peakActive = Math.max(seen.peakActive, rows[0]!.active);
      seen.samples += 1;
      await new Promise((r) => setTimeout(r, everyMs));
    }
    await client.end();
  })();
  return {
    async stop() {
      running = false;
      await loop;
      return seen;
    },
  };
}
