import { randomUUID } from 'node:crypto';
import type { RequestHandler } from 'express';
import type { Logger } from '../../observability/logger.js';
import type { Metrics } from '../../observability/metrics.js';
import { onAnswerOver } from './answer-over.js';

const REQUEST_ID = /^[A-Za-z0-9._:-]{1,128}$/;

/** A request id of our own, for a request that brought no well-formed one. */
export const newRequestId = (): string => randomUUID();

/** Honours a well-formed incoming X-Request-Id, otherwise makes one; echoed on every response. */
export const requestId: RequestHandler = (req, res, next) => {
  const incoming = req.get('x-request-id');
  const id = incoming && REQUEST_ID.test(incoming) ? incoming : newRequestId();
  res.locals.requestId = id;
  res.set('X-Request-Id', id);
  next();
};

/**
 * One log line and one metric sample per request: method, route template, status, duration; also for a
 * request whose client hung up before its answer was sent, marked `aborted` (see onAnswerOver).
 */
export function accessLog(logger: Logger, metrics: Metrics): RequestHandler {
  return (req, res, next) => {
    const started = process.hrtime.bigint();
    onAnswerOver(req, res, ({ status, aborted }) => {
      const seconds = Number(process.hrtime.bigint() - started) / 1e9;
      const route = (req as { tsRestRoute?: { path: string } }).tsRestRoute?.path ?? (req.route?.path as string | undefined) ?? 'unmatched';
      const labels = { method: req.method, route, status: String(status) };
      metrics.httpRequests.inc(labels);
      metrics.httpDuration.observe(labels, seconds);
      logger.info({ requestId: res.locals.requestId, ...labels, ms: Math.round(seconds * 1000), ...(aborted ? { aborted } : {}) }, 'request');
    });
    next();
  };
}
