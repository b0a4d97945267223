import type { Request, Response } from 'express';
import { dashedId } from './ids.js';

/** The operator's error body; the HTTP status is the code's first part (400.002.02 → 400). */
export function operatorError(res: Response, errorCode: string, errorMessage: string): void {
  const status = Number(errorCode.split('.')[0]);
  res.status(status >= 400 && status < 600 ? status : 400).json({ requestId: dashedId(), errorCode, errorMessage });
}

export const invalidField = (res: Response, field: string) => operatorError(res, '400.002.02', `Bad Request - Invalid ${field}`);

export function body(req: Request): Record<string, unknown> {
  const b: unknown = req.body;
  return b && typeof b === 'object' && !Array.isArray(b) ? (b as Record<string, unknown>) : {};
}

/** A string or number field as trimmed text; null when absent or of another type. */
export function text(value: unknown): string | null {
  if (typeof value === 'string') return value.trim();
  if (typeof value === 'number' && Number.isFinite(value)) return String(value);
  return null;
}

export const isShortcode = (v: string | null): v is string => v !== null && /^\d{5,7}$/.test(v);
/** A Kenyan number in the operator's wire format, 254 + 9 digits; whether it is on M-Pesa is another question (isMpesaNumber). */
export const isMsisdn = (v: string | null): v is string => v !== null && /^254\d{9}$/.test(v);
/** A number in Safaricom's mobile ranges (2547…, 2541…): the simulator's M-Pesa subscribers. */
export const isMpesaNumber = (v: string | null): v is string => v !== null && /^254[17]\d{8}$/.test(v);

export function isUrl(v: string | null): v is string {
  if (!v) return false;
  try {
    const url = new URL(v);
    return url.protocol === 'http:' || url.protocol === 'https:';
  } catch {
    return false;
  }
}

/** A whole amount of shillings, 1 … 250,000 (number or digit string). */
export function wholeAmount(value: unknown): number | null {
  const t = text(value);
  if (t === null || !/^\d{1,6}$/.test(t)) return null;
  const n = Number(t);
  return n >= 1 && n <= 250_000 ? n : null;
}

/** `168` → `"168.00"`. */
export const decimalAmount = (whole: number | string) => `${whole}.00`;
