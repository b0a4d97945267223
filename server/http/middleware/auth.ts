import type { NextFunction, Request, Response } from 'express';
import type { RouteMetadata } from '../../../contract/index.js';
import type { ApiKeyService, Principal } from '../../domain/auth/api-key.service.js';
import type { RateLimiter } from '../../domain/auth/rate-limiter.js';
import { sendError } from '../envelope.js';

/**
 * Reads the scope a route needs from its contract metadata and checks the X-API-Key against it.
 * Runs before request validation, so an anonymous caller learns nothing about a route's schema.
 */
export function authenticate(apiKeys: ApiKeyService, rateLimiter: RateLimiter) {
  return async (req: Request, res: Response, next: NextFunction) => {
    const metadata = (req as Request & { tsRestRoute?: { metadata?: RouteMetadata } }).tsRestRoute?.metadata;
    if (!metadata || metadata.scope === null) return next();
    try {
      const principal = await apiKeys.authenticate(req.get('x-api-key'));
      if (!principal) return sendError(res, 'UNAUTHORIZED', 'Missing, unknown or revoked API key (send it in the X-API-Key header)');
      if (!principal.scopes.includes(metadata.scope)) {
        return sendError(res, 'FORBIDDEN', `This API key lacks the required scope: ${metadata.scope}`);
      }
      if (rateLimiter.enabled) {
        const verdict = await rateLimiter.hit(principal.keyId);
        res.set('X-RateLimit-Limit', String(verdict.limit));
        res.set('X-RateLimit-Remaining', String(verdict.remaining));
        if (!verdict.allowed) {
          return sendError(res, 'RATE_LIMITED', `Too many requests for this API key: at most ${verdict.limit} a minute`, undefined, {
            'Retry-After': String(verdict.retryAfterSec),
          });
        }
      }
      res.locals.principal = principal;
      next();
    } catch (err) {
      next(err);
    }
  };
}

/** The authenticated principal of a request that passed `authenticate`. */
export function principalOf(res: Response): Principal {
  const principal = res.locals.principal as Principal | undefined;
  if (!principal) throw new Error('route reached without an authenticated principal');
  return principal;
}
