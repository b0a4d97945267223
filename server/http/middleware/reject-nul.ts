import type { RequestHandler } from 'express';
import { sendError } from '../envelope.js';

/** Where the first U+0000 sits in a parsed query or body (a dotted path), or null. Iterative: bodies may nest deeply. */
export function findNulCharacter(root: unknown, rootName: string): string | null {
  const stack: [unknown, string][] = [[root, rootName]];
  while (stack.length > 0) {
    const [value, path] = stack.pop()!;
    if (typeof value === 'string') {
      if (value.includes('\u0000')) return path;
    } else if (value !== null && typeof value === 'object') {
      for (const [key, child] of Object.entries(value)) {
        const childPath = path ? `${path}.${key}` : key;
        if (key.includes('\u0000')) return childPath;
        stack.push([child, childPath]);
      }
    }
  }
  return null;
}

/**
 * PostgreSQL text and jsonb cannot hold U+0000, so a NUL anywhere in a query or JSON body (a legal
 * `\u0000` escape) would fail deep inside a query as a 500. Refused up front as a validation error.
 */
export const rejectNulCharacters: RequestHandler = (req, res, next) => {
  const field = findNulCharacter(req.query, '') ?? findNulCharacter(req.body, '');
  if (field === null) return next();
  const name = field || 'body';
  sendError(res, 'VALIDATION_ERROR', `Invalid request: ${name} must not contain NUL characters`, [{ field: name, issue: 'must not contain NUL characters' }]);
};
