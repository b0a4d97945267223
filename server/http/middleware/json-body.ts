import express, { type Request, type RequestHandler } from 'express';
import { isLosslessNumber, isSafeNumber, parse as parseLossless } from 'lossless-json';
import { DomainError } from '../../domain/errors.js';
import { ERROR_MESSAGES } from '../../../contract/errors.js';

export const BODY_LIMIT = '100kb';
/** Keeps the exact request bytes: provider callbacks are verified over the raw body. */
export type RawBodyRequest = Request & { rawBody?: Buffer; exactNumbers?: Map<string, string> };
/** Deeper than any request or provider callback needs; keeps the recursive parser far from the stack limit. */
export const MAX_JSON_DEPTH = 64;

const badRequest = (message: string) => new DomainError('BAD_REQUEST', message);

const isSpace = (ch: number) => ch === 0x20 || ch === 0x09 || ch === 0x0a || ch === 0x0d;
const isDigit = (ch: number) => ch >= 0x30 && ch <= 0x39;
const isNumberChar = (ch: number) => isDigit(ch) || ch === 0x2d || ch === 0x2b || ch === 0x2e || ch === 0x65 || ch === 0x45;
/** Up to 15 significant digits, no exponent, no trailing fractional zero: always exactly what a double prints back. */
const PLAINLY_SAFE = /^-?\d{1,15}$|^-?(?=[\d.]{3,16}$)\d+\.\d*[1-9]$/;
/**
 * A number whose text a double does not keep: one it does not hold exactly, or one with trailing
 * fractional zeros (`10.000` reads as 10), whose decimal places an amount is judged by.
 */
const textNotKept = (token: string) => !isSafeNumber(token) || /\.\d*0$/.test(token);

/**
 * One pass over JSON text outside its strings: is it nested deeper than `limit`, and does it need the
 * exact (slower) parser — a number no double holds exactly, or a key that may be given twice (a
 * repeated key, or one with escapes that could spell another)? Most bodies need neither, and take
 * JSON.parse, which is many times faster on large bodies.
 */
function scan(text: string, limit: number): { tooDeep: boolean; needsExact: boolean } {
  const objects: (Set<string> | null)[] = [];
  let needsExact = false;
  for (let i = 0; i < text.length; i += 1) {
    const ch = text.charCodeAt(i);
    if (ch === 0x7b || ch === 0x5b) {
      objects.push(ch === 0x7b ? new Set() : null);
      if (objects.length > limit) return { tooDeep: true, needsExact };
    } else if (ch === 0x7d || ch === 0x5d) objects.pop();
    else if (ch === 0x22) {
      // The closing quote: the next one not preceded by an odd number of backslashes.
      const start = i + 1;
      for (i = text.indexOf('"', start); i !== -1; i = text.indexOf('"', i + 1)) {
        let backslashes = 0;
        while (text.charCodeAt(i - 1 - backslashes) === 0x5c) backslashes += 1;
        if (backslashes % 2 === 0) break;
      }
      if (i === -1) return { tooDeep: false, needsExact: true }; // unterminated: the parser says why
      let next = i + 1;
      while (next < text.length && isSpace(text.charCodeAt(next))) next += 1;
      const keys = objects.at(-1);
      if (text.charCodeAt(next) === 0x3a && keys) {
        const key = text.slice(start, i);
        if (key.includes('\\') || keys.has(key)) needsExact = true;
        else keys.add(key);
      }
    } else if (isDigit(ch) || ch === 0x2d) {
      const start = i;
      while (i + 1 < text.length && isNumberChar(text.charCodeAt(i + 1))) i += 1;
      const token = text.slice(start, i + 1);
      if (!PLAINLY_SAFE.test(token) && textNotKept(token)) needsExact = true;
    }
  }
  return { tooDeep: false, needsExact };
}

/**
 * JSON numbers as JSON.parse reads them, plus the exact source text of every number whose text the
 * double does not keep (`19.999999999999999` reads as 20, `1e400` as Infinity, `10.000` as 10), by dotted path.
 * Node 20's JSON.parse gives no access to a number's source text, hence lossless-json: its numbers
 * keep their text, and this walk turns them into ordinary numbers, so validation and provider
 * callbacks see exactly what JSON.parse would have given them.
 */
function toNumbers(root: unknown, exact: Map<string, string>): unknown {
  const convert = (value: unknown, path: string): unknown => {
    if (isLosslessNumber(value)) {
      if (textNotKept(value.value)) exact.set(path, value.value);
      return Number(value.value);
    }
    return value;
  };
  const stack: [Record<string, unknown> | unknown[], string][] = [];
  const top = convert(root, '');
  if (top !== null && typeof top === 'object') stack.push([top as Record<string, unknown>, '']);
  while (stack.length > 0) {
    const [node, path] = stack.pop()!;
    for (const key of Object.keys(node)) {
      const childPath = path ? `${path}.${key}` : key;
      const child = convert((node as Record<string, unknown>)[key], childPath);
      (node as Record<string, unknown>)[key] = child;
      if (child !== null && typeof child === 'object') stack.push([child as Record<string, unknown>, childPath]);
    }
  }
  return top;
}

/** Parses a JSON request body: UTF-8 only, an object or array at the top, no duplicate keys. */
export function parseJsonBody(bytes: Buffer, charset: string | undefined): { body: unknown; exactNumbers: Map<string, string> } {
  const exactNumbers = new Map<string, string>();
  if (charset !== undefined && !/^utf-?8$/i.test(charset)) throw badRequest(`Request body charset ${charset.slice(0, 40)} is not supported; send UTF-8`);
  if (bytes.length === 0) return { body: {}, exactNumbers };
  let text: string;
  try {
    text = new TextDecoder('utf-8', { fatal: true, ignoreBOM: true }).decode(bytes);
  } catch {
    throw badRequest('Request body is not valid UTF-8');
  }
  // JSON's own whitespace only: a byte order mark or other Unicode space in front is not JSON.
  const first = /[^ \t\r\n]/.exec(text)?.[0];
  if (first !== '{' && first !== '[') throw badRequest('Request body must be a JSON object');
  const { tooDeep, needsExact } = scan(text, MAX_JSON_DEPTH);
  if (tooDeep) throw badRequest(`Request body is nested deeper than ${MAX_JSON_DEPTH} levels`);
  try {
    if (!needsExact) return { body: JSON.parse(text) as unknown, exactNumbers };
    return { body: toNumbers(parseLossless(text), exactNumbers), exactNumbers };
  } catch {
    // Malformed JSON, or a key given twice with different values (which one would count is ambiguous).
    throw badRequest(ERROR_MESSAGES.invalidJson);
  }
}

/**
 * A decimal input (an amount) as the client wrote it: the exact text when the body held a JSON
 * number whose text a double does not keep, otherwise the validated value. So `19.999999999999999`
 * and `10.000` are judged against the currency's digits, never silently read as 20 and 10.
 */
export function asSent<T>(req: Request, path: string, value: T): T | string {
  return (req as RawBodyRequest).exactNumbers?.get(path) ?? value;
}

function charsetOf(contentType: string | undefined): string | undefined {
  const match = /;\s*charset\s*=\s*"?([^";\s]*)"?/i.exec(contentType ?? '');
  return match ? match[1] : undefined;
}

/**
 * A body of just `{}` (spaces aside): it can carry no parameter, and decisions.md accepts it on the routes
 * that take none (a capture) however it was sent — `curl -d '{}'` sends it as a form, fetch as text/plain.
 */
function isEmptyObject(bytes: Buffer): boolean {
  return bytes.length <= 64 && bytes.toString('latin1').trim().replace(/\s+/g, '') === '{}';
}

/** application/json, or a structured-syntax JSON type (application/*+json), parameters aside. */
function isJsonType(contentType: string | undefined): boolean {
  const type = (contentType ?? '').split(';')[0]!.trim().toLowerCase();
  return type === 'application/json' || /^application\/[^/\s]+\+json$/.test(type);
}

/**
 * Reads request bodies of any type within the size limit (inflating gzip/deflate), so one over 100 KiB
 * is 413 whatever its Content-Type, and keeps the exact bytes: provider callbacks are verified over
 * the raw body. A non-empty body must be JSON: one sent as a form or text/plain is refused 400 rather
 * than read as {} (which ran a request with the defaults instead of what was sent) — except `{}` itself. Parsing is ours
 * (see parseJsonBody); reading, limits and decompression are body-parser's, whose errors the error
 * handler maps to 4xx. Mounted per contract route after authentication (app.ts): an unknown route or
 * an anonymous caller is answered before any body is read.
 */
export function jsonBody(): RequestHandler[] {
  const read = express.raw({ limit: BODY_LIMIT, type: () => true, inflate: true });
  const parse: RequestHandler = (req, _res, next) => {
    if (!Buffer.isBuffer(req.body)) return next();
    const bytes = req.body;
    (req as RawBodyRequest).rawBody = bytes;
    const contentType = req.get('content-type');
    const json = isJsonType(contentType);
    try {
      if (!json && bytes.length > 0 && !isEmptyObject(bytes)) throw badRequest(ERROR_MESSAGES.notJson(contentType));
      const { body, exactNumbers } = parseJsonBody(bytes, json ? charsetOf(contentType) : undefined);
      req.body = body;
      (req as RawBodyRequest).exactNumbers = exactNumbers;
      next();
    } catch (err) {
      next(err);
    }
  };
  return [read, parse];
}
