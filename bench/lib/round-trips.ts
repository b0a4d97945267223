import type { LoopbackClient } from './http.js';

/** db_round_trips_total of one service process, by pool (see server/observability/metrics.ts). */
export interface RoundTrips {
  service: number;
  jobs: number;
  sandbox: number;
  listener: number;
}

/** No round trip yet: a process's counters start at zero, so this is "since boot". */
export const SINCE_BOOT: RoundTrips = { service: 0, jobs: 0, sandbox: 0, listener: 0 };

/** Scrapes the process's /metrics (a scrape's own few queries are noise next to thousands of requests). */
export async function readRoundTrips(client: LoopbackClient): Promise<RoundTrips> {
  const res = await client.request({ method: 'GET', path: '/metrics' });
  if (res.status !== 200) throw new Error(`GET /metrics answered ${res.status}`);
  const count = (pool: keyof RoundTrips) => Number(new RegExp(`^db_round_trips_total\\{pool="${pool}"\\} (\\S+)$`, 'm').exec(res.body)?.[1] ?? 0);
  return { service: count('service'), jobs: count('jobs'), sandbox: count('sandbox'), listener: count('listener') };
}

/**
 * Round trips per request between two scrapes: the service's (its ORM pool, its job queue's and its cache's
 * LISTEN connection; plus `extraService`, statements the benchmark sends on the service's behalf, e.g. the
 * worker's count fold) and the simulator's (the sandbox pool), reported apart.
 */
export function roundTripsPerRequest(before: RoundTrips, after: RoundTrips, requests: number, extraService = 0) {
  const per = (n: number) => Math.round((n / Math.max(requests, 1)) * 100) / 100;
  const orm = after.service - before.service;
  const jobs = after.jobs - before.jobs;
  const listener = after.listener - before.listener;
  return {
    service: per(orm + jobs + listener + extraService),
    serviceOrm: per(orm),
    serviceJobs: per(jobs),
    serviceListener: per(listener),
    serviceExtra: per(extraService),
    simulator: per(after.sandbox - before.sandbox),
  };
}
