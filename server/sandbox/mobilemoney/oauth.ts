import type { NextFunction, Request, Response, Router } from 'express';
import type { SandboxDeps } from '../module.js';
import { issueToken, tokenState } from './store.js';
import { REJECTED_CONSUMER_SECRET } from './test-values.js';
import { operatorError } from './wire.js';

/** Tokens live 3600 s; the operator announces 3599 (as a string). */
const TOKEN_LIFETIME_SECONDS = 3599;

export type AuthedRequest = Request & { consumerKey?: string };

/** `GET /oauth/v1/generate?grant_type=client_credentials` with Basic auth. */
export function mountOauth(router: Router, deps: SandboxDeps): void {
  router.get('/oauth/v1/generate', async (req: Request, res: Response, next: NextFunction) => {
    try {
      const header = req.get('authorization') ?? '';
      const m = /^Basic\s+([A-Za-z0-9+/=]+)$/.exec(header.trim());
      const decoded = m ? Buffer.from(m[1]!, 'base64').toString('utf8') : '';
      const colon = decoded.indexOf(':');
      if (!m || colon <= 0 || colon === decoded.length - 1) {
        operatorError(res, '400.008.01', 'Invalid Authentication passed');
        return;
      }
      if (req.query.grant_type !== 'client_credentials') {
        operatorError(res, '400.008.02', 'Invalid grant type passed');
        return;
      }
      // Daraja answers a wrong consumer key or secret with the same 400.008.01 as a malformed header.
      if (decoded.slice(colon + 1) === REJECTED_CONSUMER_SECRET) {
        operatorError(res, '400.008.01', 'Invalid Authentication passed');
        return;
      }
      const token = await issueToken(deps.em, decoded.slice(0, colon), TOKEN_LIFETIME_SECONDS);
      res.json({ access_token: token, expires_in: String(TOKEN_LIFETIME_SECONDS) });
    } catch (err) {
      next(err);
    }
  });
}

/**
 * How an API refuses a missing, unknown or revoked token: most with 404.001.04 / 404.001.03, and a token
 * revoked by a newer one for the same consumer key (another system sharing the key took a token) with
 * HTTP 401 `401.002.01` "Error Occurred - Invalid Access Token"; Pull Transactions with 401.001 (providers.md).
 */
export interface TokenRefusals {
  missing: [code: string, message: string];
  invalid: [code: string, message: string];
  revoked: [code: string, message: string];
}
const DARAJA_TOKEN_REFUSALS: TokenRefusals = {
  missing: ['404.001.04', 'Invalid Authentication Header'],
  invalid: ['404.001.03', 'Invalid Access Token'],
  revoked: ['401.002.01', 'Error Occurred - Invalid Access Token'],
};

/** Every API call needs `Authorization: Bearer <live token>`. */
export function requireToken(deps: SandboxDeps, refusals: TokenRefusals = DARAJA_TOKEN_REFUSALS) {
  return async (req: AuthedRequest, res: Response, next: NextFunction) => {
    try {
      const header = req.get('authorization') ?? '';
      const m = /^Bearer\s+(\S+)$/.exec(header.trim());
      if (!m) {
        operatorError(res, ...refusals.missing);
        return;
      }
      const token = await tokenState(deps.em, m[1]!);
      if (token.state !== 'live') {
        operatorError(res, ...(token.state === 'revoked' ? refusals.revoked : refusals.invalid));
        return;
      }
      req.consumerKey = token.consumerKey;
      next();
    } catch (err) {
      next(err);
    }
  };
}
