import type { LoopbackClient } from './http.js';

/** db_round_trips_total of one service process, by pool (see server/observability/metrics.ts). */
export interface RoundTrips {
  service: number;
  jobs: number;
  sandbox: number;
}

/** Scrapes the process's /metrics (a scrape's own few queries are noise next to thousands of requests). */
export async function readRoundTrips(client: LoopbackClient): Promise<RoundTrips> {
  const res = await client.request({ method: 'GET', path: '/metrics' });
  if (res.status !== 200) throw new Error(`GET /metrics answered ${res.status}`);
  const count = (pool: keyof RoundTrips) => Number(new RegExp(`^db_round_trips_total\\{pool="${pool}"\\} (\\S+)$`, 'm').exec(res.body)?.[1] ?? 0);
  return { service: count('service'), jobs: count('jobs'), sandbox: count('sandbox') };
}

/**
 * Round trips per request between two scrapes: the service's (its ORM pool plus its job queue's) and
 * the simulator's (the sandbox pool), reported apart.
 */
export function roundTripsPerRequest(before: RoundTrips, after: RoundTrips, requests: number) {
  const per = (n: number) => Math.round((n / Math.max(requests, 1)) * 100) / 100;
  const service = per(after.service - before.service);
  const jobs = per(after.jobs - before.jobs);
  return { service: Math.round((service + jobs) * 100) / 100, serviceOrm: service, serviceJobs: jobs, simulator: per(after.sandbox - before.sandbox) };
}
