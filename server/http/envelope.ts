import type { Response } from 'express';
import type { ErrorCode } from '../../contract/index.js';
import type { FieldIssue } from '../domain/errors.js';
import { HTTP_STATUS } from './error-map.js';

export function requestIdOf(res: Response): string {
  return String(res.locals.requestId ?? '');
}

/** The error envelope (decisions.md), for an answer written without express too (see client-error.ts). */
export function errorEnvelope(requestId: string, code: ErrorCode, message: string, details?: FieldIssue[]) {
  return {
    success: false as const,
    error: { code, message, ...(details && details.length > 0 ? { details } : {}), request_id: requestId },
  };
}

export function errorBody(res: Response, code: ErrorCode, message: string, details?: FieldIssue[]) {
  return errorEnvelope(requestIdOf(res), code, message, details);
}

/** Sends an error in the envelope with the status the error table gives its code. */
export function sendError(res: Response, code: ErrorCode, message: string, details?: FieldIssue[], headers?: Record<string, string>) {
  if (headers) res.set(headers);
  res.status(HTTP_STATUS[code]).json(errorBody(res, code, message, details));
}

/** A typed success response for a ts-rest handler. */
export function ok<T>(data: T) {
  return { status: 200 as const, body: { success: true as const, data } };
}

/** The answer repeats the first one given for this Idempotency-Key. */
export function markReplayed(res: Response): void {
  res.setHeader('Idempotent-Replayed', 'true');
}
