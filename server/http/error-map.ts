import type { ErrorCode } from '../../contract/index.js';
import { connectionNotObtained } from '../persistence/acquire-failures.js';

/** The one table from error code to HTTP status. */
export const HTTP_STATUS: Record<ErrorCode, number> = {
  BAD_REQUEST: 400,
  UNAUTHORIZED: 401,
  FORBIDDEN: 403,
  NOT_FOUND: 404,
  CONFLICT: 409,
  PAYLOAD_TOO_LARGE: 413,
  VALIDATION_ERROR: 422,
  RATE_LIMITED: 429,
  PROVIDER_ERROR: 502,
  INTERNAL_ERROR: 500,
  SERVICE_UNAVAILABLE: 503,
};

/** Seconds a client should wait before retrying a 503 (sent as Retry-After). */
export const RETRY_AFTER_SECONDS = 1;

/**
 * Whether `err` says the database could not serve the request for lack of capacity: no free pooled
 * connection in time (knex/tarn, pg.Pool) or the server refusing new connections. That is the
 * service being overloaded, never the merchant's conflict: it is answered 503 with Retry-After.
 */
export function isCapacityExhausted(err: unknown): boolean {
  const e = err as { name?: string; message?: string; code?: string; cause?: unknown } | null;
  if (!e || typeof e !== 'object') return false;
  if (e.name === 'KnexTimeoutError') return true;
  // 53300 too_many_connections, 53000 insufficient_resources, 57P03 cannot_connect_now.
  if (e.code === '53300' || e.code === '53000' || e.code === '57P03') return true;
  const message = e.message ?? '';
  if (/Timeout acquiring a connection|timeout exceeded when trying to connect|sorry, too many clients/i.test(message)) return true;
  return e.cause !== undefined && e.cause !== err && isCapacityExhausted(e.cause);
}

/**
 * Whether `err` is the ORM's pool failing to obtain a connection at all: PostgreSQL refusing it, down,
 * unreachable or shutting down (ECONNREFUSED, ENOTFOUND, EAI_AGAIN, 57P01/57P03 at login, a connection
 * closed during its login), marked where the pool throws it (persistence/acquire-failures.ts). Nothing
 * was sent for the statement it was to run, so the request stopped at that point, as after a pool
 * timeout: answered 503 with Retry-After. The same words from a connection already in use (lost under a
 * query, a COMMIT whose answer never came) are not marked: a write may have been done, and that stays a 500.
 */
export function isDatabaseUnreachable(err: unknown): boolean {
  return connectionNotObtained(err) && !isCapacityExhausted(err);
}
