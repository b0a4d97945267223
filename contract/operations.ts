import { initContract } from '@ts-rest/core';
import { extendApi } from '@anatine/zod-openapi';
import { z } from 'zod';
import { ErrorBodySchema } from './common.js';

const c = initContract();

export const METRICS_EXAMPLE =
  '# HELP payments Payments stored, by provider and status\n# TYPE payments gauge\npayments{provider="cardpay",status="completed"} 42\n';
const ops = { scope: null, tag: 'Operations' } as const;

const HealthSchema = extendApi(z.object({ success: z.literal(true), data: z.object({ status: z.literal('ok') }) }), {
  example: { success: true, data: { status: 'ok' } },
});

const ReadinessSchema = extendApi(
  z.object({
    success: z.boolean(),
    data: z.object({
      status: z.enum(['ready', 'not_ready', 'draining']),
      checks: z.object({
        database: z.boolean().describe('The database answers within 3 s and this session can write (not a hot standby, not default_transaction_read_only)'),
        job_runner: z.boolean(),
      }),
      reason: z.string().optional().describe('With `not_ready`: why (the database does not answer, is read-only, or the job runner is not connected)'),
    }),
  }),
  { example: { success: true, data: { status: 'ready', checks: { database: true, job_runner: true } } } },
);

const NotReadySchema = extendApi(ReadinessSchema, {
  example: {
    success: false,
    data: { status: 'not_ready', checks: { database: false, job_runner: false }, reason: 'the database is read-only (a hot standby, or default_transaction_read_only on): every write would fail' },
  },
});

/**
 * Probes and metrics: served by every api process on PORT and by a worker (ROLE=worker) on
 * WORKER_PORT, outside /v1 and without an API key. Documented in openapi.json; not part of the
 * merchant contract the SDK is built from (server/http/ops-routes.ts serves them).
 */
export const operationsContract = c.router({
  healthz: {
    method: 'GET',
    path: '/healthz',
    summary: 'Liveness',
    description: 'Answers 200 while the process runs; it checks nothing else (use it as a liveness probe).',
    metadata: ops,
    responses: { 200: HealthSchema },
  },
  readyz: {
    method: 'GET',
    path: '/readyz',
    summary: 'Readiness',
    description:
      'Answers 200 when the database answers and takes writes and the job runner is connected, 503 `not_ready` with a `reason` otherwise (use it as a readiness probe); ' +
      'also 503, with status `draining`, once the process is shutting down (SIGTERM): it finishes what is under way and takes nothing new.',
    metadata: ops,
    responses: { 200: ReadinessSchema, 503: NotReadySchema },
  },
  metrics: {
    method: 'GET',
    path: '/metrics',
    summary: 'Prometheus metrics',
    description:
      'Prometheus text format: HTTP requests and latency, payments by provider and status, provider call latency, provider callbacks, ' +
      'webhook deliveries and their lag, the job queue, integrity mismatches, and Node.js process metrics. With METRICS_TOKEN set it ' +
      'requires `Authorization: Bearer <METRICS_TOKEN>` (401 otherwise).',
    metadata: ops,
    responses: {
      200: c.otherResponse({
        contentType: 'text/plain',
        body: extendApi(z.string(), { example: METRICS_EXAMPLE }),
      }),
      401: ErrorBodySchema,
    },
  },
});
