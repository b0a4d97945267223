import type { NextFunction, Request, Response } from 'express';
import type { RouteMetadata } from '../../../contract/index.js';
import type { ApiKeyService, Principal } from '../../domain/auth/api-key.service.js';
import { describeRule, type RateLimiter, type RateLimitVerdict } from '../../domain/auth/rate-limiter.js';
import type { ProviderRegistry } from '../../domain/ports.js';
import { callbackProvider } from '../routers/provider-callbacks.router.js';
import { sendError } from '../envelope.js';
import { ERROR_MESSAGES } from '../../../contract/errors.js';

/** Sets the rate-limit headers; answers 429 with Retry-After and returns false when over the budget. */
function admit(res: Response, limiter: RateLimiter, verdict: RateLimitVerdict, who: string): boolean {
  res.set('X-RateLimit-Limit', String(verdict.limit));
  res.set('X-RateLimit-Remaining', String(verdict.remaining));
  if (verdict.allowed) return true;
  sendError(res, 'RATE_LIMITED', ERROR_MESSAGES.rateLimited(who, describeRule(limiter.rule)), undefined, {
    'Retry-After': String(verdict.retryAfterSec),
  });
  return false;
}

/** The client address as TRUST_PROXY defines it (the socket's own unless a proxy is trusted). */
function sourceAddress(req: Request): string {
  return req.ip ?? req.socket.remoteAddress ?? 'unknown';
}

/**
 * A request whose key did not authenticate: 401, or 429 once its address is past the failed-authentication
 * budget. Counted after the key lookup failed, never before it: a valid key pays nothing for this budget
 * (its lookup is served from the principal cache, no round trip), and one client trying keys behind a
 * shared address does not lock out the valid keys sent from it. Only the 429 carries the budget's headers
 * (a 401 carries none, as before).
 */
async function refuseUnauthenticated(req: Request, res: Response, failedAuthRateLimiter: RateLimiter): Promise<void> {
  if (failedAuthRateLimiter.enabled) {
    const verdict = await failedAuthRateLimiter.hit(`auth-failed:${sourceAddress(req)}`);
    if (!verdict.allowed) {
      admit(res, failedAuthRateLimiter, verdict, 'from this address with a missing, unknown or revoked API key');
      return;
    }
  }
  sendError(res, 'UNAUTHORIZED', ERROR_MESSAGES.unauthorized);
}

/**
 * Whether a callback comes from one of its provider's own addresses that the per-address callback limit
 * does not count (NotificationScheme.uncountedSource: the mobile-money operator's allowlist, since the
 * operator does not send a refused callback again). A pure check of the address: nothing is looked up.
 */
function uncountedCallback(req: Request, providers: ProviderRegistry): boolean {
  const provider = callbackProvider(req.path);
  return provider !== null && (providers.find(provider)?.notifications.uncountedSource?.(sourceAddress(req)) ?? false);
}

/**
 * Reads the scope a route needs from its contract metadata and checks the X-API-Key against it.
 * Runs before request validation, so an anonymous caller learns nothing about a route's schema.
 * Provider callbacks (no scope) are limited per source address instead, before any lookup,
 * verification or outbound call is spent on them — but for the addresses a provider that does not resend
 * callbacks posts from (uncountedCallback). Requests whose key does not authenticate are limited
 * per source address too (refuseUnauthenticated).
 */
export function authenticate(
  apiKeys: ApiKeyService,
  rateLimiter: RateLimiter,
  callbackRateLimiter: RateLimiter,
  failedAuthRateLimiter: RateLimiter,
  providers: ProviderRegistry,
) {
  return async (req: Request, res: Response, next: NextFunction) => {
    const metadata = (req as Request & { tsRestRoute?: { metadata?: RouteMetadata } }).tsRestRoute?.metadata;
    if (!metadata) return next();
    try {
      if (metadata.scope === null) {
        if (callbackRateLimiter.enabled && !uncountedCallback(req, providers)) {
          if (!admit(res, callbackRateLimiter, await callbackRateLimiter.hit(`callback:${sourceAddress(req)}`), 'from this address')) return;
        }
        return next();
      }
      const principal = await apiKeys.authenticate(req.get('x-api-key'));
      if (!principal) return await refuseUnauthenticated(req, res, failedAuthRateLimiter);
      if (!principal.scopes.includes(metadata.scope)) {
        return sendError(res, 'FORBIDDEN', ERROR_MESSAGES.missingScope(metadata.scope));
      }
      if (rateLimiter.enabled && !admit(res, rateLimiter, await rateLimiter.hit(principal.keyId), 'for this API key')) return;
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
