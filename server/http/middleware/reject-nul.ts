import type { RequestHandler } from 'express';
import { isZodType, type AppRoute } from '@ts-rest/core';
import { sendError } from '../envelope.js';
import { ERROR_MESSAGES } from '../../../contract/errors.js';

const LONE_SURROGATE = /[\ud800-\udbff](?![\udc00-\udfff])|(?<![\ud800-\udbff])[\udc00-\udfff]/;

/** Why PostgreSQL could not store `text`, or null when it can. */
function unstorable(text: string): string | null {
  if (text.includes('\u0000')) return 'must not contain NUL characters';
  if (LONE_SURROGATE.test(text)) return 'must be valid Unicode text (it holds a lone UTF-16 surrogate)';
  return null;
}

/** Where the first text PostgreSQL cannot store sits in a parsed query or body (a dotted path), and why. Iterative: bodies may nest deeply. */
export function findUnstorableText(root: unknown, rootName: string): { field: string; issue: string } | null {
  const stack: [unknown, string][] = [[root, rootName]];
  while (stack.length > 0) {
    const [value, path] = stack.pop()!;
    if (typeof value === 'string') {
      const issue = unstorable(value);
      if (issue) return { field: path, issue };
    } else if (value !== null && typeof value === 'object') {
      for (const [key, child] of Object.entries(value)) {
        const childPath = path ? `${path}.${key}` : key;
        const issue = unstorable(key);
        if (issue) return { field: childPath, issue: `is a field name that ${issue}` };
        stack.push([child, childPath]);
      }
    }
  }
  return null;
}

/**
 * PostgreSQL text and jsonb hold neither U+0000 nor a lone UTF-16 surrogate, yet both are legal JSON
 * escapes (`\u0000`, `\ud800`): anywhere in a query or body they would fail deep inside a query as a
 * 500. Refused up front as a validation error naming the field — in the parts the route reads (its
 * contract declares a query or a body). A route that reads neither ignores a stray parameter or body,
 * so nothing of it is ever stored: refusing it would be the one 422 such a route could answer, which
 * openapi.json rightly does not document.
 */
export const rejectNulCharacters: RequestHandler = (req, res, next) => {
  const route = (req as { tsRestRoute?: AppRoute }).tsRestRoute;
  const readsQuery = !route || isZodType(route.query);
  const readsBody = !route || ('body' in route && isZodType(route.body));
  const found = (readsQuery ? findUnstorableText(req.query, '') : null) ?? (readsBody ? findUnstorableText(req.body, '') : null);
  if (found === null) return next();
  const field = found.field || 'body';
  sendError(res, 'VALIDATION_ERROR', ERROR_MESSAGES.invalidRequest(field, found.issue), [{ field, issue: found.issue }]);
};
