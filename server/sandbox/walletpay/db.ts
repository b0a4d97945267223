import { randomBytes } from 'node:crypto';
import type { NextFunction, Request, RequestHandler, Response } from 'express';

export { dbOf, inTransaction, type Db } from '../db.js';

const UPPER_ALNUM = 'ABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789';

/** PayPal-looking ids: 17 upper-case alphanumerics for orders, captures, refunds; 13 for payer ids. */
export function paypalId(length = 17): string {
  let out = '';
  for (const b of randomBytes(length)) out += UPPER_ALNUM[b % UPPER_ALNUM.length];
  return out;
}

/** PayPal's timestamps: ISO 8601 UTC without milliseconds. */
export function isoTime(date: Date | string = new Date()): string {
  return new Date(date).toISOString().replace(/\.\d{3}Z$/, 'Z');
}

/** Express 4 does not catch rejected promises: route them to the simulator's error handler. */
export function route(fn: (req: Request, res: Response) => Promise<unknown>): RequestHandler {
  return (req: Request, res: Response, next: NextFunction) => {
    fn(req, res).catch(next);
  };
}

/** The simulator's own address as the outside world sees it (links, certificate URL, approval page). */
export function simulatorBase(publicBaseUrl: string): string {
  return `${publicBaseUrl}/sandbox/walletpay`;
}
