import { createHash, randomBytes } from 'node:crypto';
import express, { type NextFunction, type Request, type Response, type Router } from 'express';
import type { SandboxDeps } from '../module.js';
import { dbOf, isoTime, route } from './db.js';
import { PaypalError } from './errors.js';

/** Lifetime of an access token, as PayPal's typical responses give it. */
export const TOKEN_LIFETIME_S = 32_400;

/** The client secret the simulator refuses, so tests can exercise bad credentials. */
export const REJECTED_CLIENT_SECRET = 'bad-secret';

const SCOPE = [
  'https://uri.paypal.com/services/payments/payment/authcapture',
  'https://uri.paypal.com/services/payments/refund',
  'https://uri.paypal.com/services/applications/webhooks',
  'https://uri.paypal.com/payments/payouts',
  'openid',
].join(' ');

/** The tenant a bearer token belongs to, set by `requireBearer`. */
export const clientIdOf = (res: Response): string => res.locals.walletpayClientId as string;

function parseBasic(header: string | undefined): { clientId: string; clientSecret: string } | null {
  const match = /^Basic\s+(.+)$/i.exec(header ?? '');
  if (!match) return null;
  const decoded = Buffer.from(match[1]!, 'base64').toString('utf8');
  const colon = decoded.indexOf(':');
  if (colon <= 0) return null;
  return { clientId: decoded.slice(0, colon), clientSecret: decoded.slice(colon + 1) };
}

/** A stable app id per client, like PayPal's `APP-80W284485P519543T`. */
function appId(clientId: string): string {
  const hex = createHash('sha256').update(clientId).digest('hex').toUpperCase();
  return `APP-${hex.slice(0, 17)}`;
}

/**
 * `POST /v1/oauth2/token` (client credentials) and `POST /_control/expire-tokens`. Any client_id and
 * client_secret pair is a tenant (except the secret `bad-secret`, refused as PayPal refuses a wrong
 * secret); tokens live in PostgreSQL with their expiry.
 */
export function mountAuth(router: Router, deps: SandboxDeps): void {
  const db = () => dbOf(deps.em);

  router.post(
    '/v1/oauth2/token',
    express.urlencoded({ extended: false, limit: '10kb' }),
    route(async (req, res) => {
      const basic = parseBasic(req.headers.authorization);
      if (!basic || basic.clientSecret === REJECTED_CLIENT_SECRET || basic.clientSecret === '') {
        res.status(401).json({ error: 'invalid_client', error_description: 'Client Authentication failed' });
        return;
      }
      const grantType = (req.body as Record<string, unknown> | undefined)?.grant_type;
      if (grantType !== 'client_credentials') {
        res.status(400).json({
          error: 'unsupported_grant_type',
          error_description: grantType ? 'Grant Type is not supported' : 'Grant Type is NULL',
        });
        return;
      }
      const token = `A21AA${randomBytes(48).toString('base64url')}`;
      await db().query(
        `INSERT INTO sandbox_walletpay_tokens (access_token, client_id, expires_at) VALUES (?, ?, now() + make_interval(secs => ?))`,
        [token, basic.clientId, TOKEN_LIFETIME_S],
      );
      res.json({
        scope: SCOPE,
        access_token: token,
        token_type: 'Bearer',
        app_id: appId(basic.clientId),
        expires_in: TOKEN_LIFETIME_S,
        nonce: `${isoTime()}${randomBytes(24).toString('base64url')}`,
      });
    }),
  );

  /** Test control: every token (or every token of `client_id`) expires now, to exercise refresh. */
  router.post(
    '/_control/expire-tokens',
    route(async (req, res) => {
      const clientId = (req.body as { client_id?: unknown } | undefined)?.client_id;
      const rows = typeof clientId === 'string'
        ? await db().query<{ n: number }>(
          `WITH e AS (UPDATE sandbox_walletpay_tokens SET expires_at = now() - interval '1 second' WHERE client_id = ? AND expires_at > now() RETURNING 1)
           SELECT count(*)::int AS n FROM e`,
          [clientId],
        )
        : await db().query<{ n: number }>(
          `WITH e AS (UPDATE sandbox_walletpay_tokens SET expires_at = now() - interval '1 second' WHERE expires_at > now() RETURNING 1)
           SELECT count(*)::int AS n FROM e`,
        );
      res.json({ expired: rows[0]?.n ?? 0 });
    }),
  );
}

/** Middleware for the API routes: a live bearer token, else PayPal's 401 AUTHENTICATION_FAILURE. */
export function requireBearer(deps: SandboxDeps) {
  return (req: Request, res: Response, next: NextFunction): void => {
    const match = /^Bearer\s+(\S+)$/i.exec(req.headers.authorization ?? '');
    if (!match) {
      next(new PaypalError(401));
      return;
    }
    dbOf(deps.em)
      .query<{ client_id: string }>('SELECT client_id FROM sandbox_walletpay_tokens WHERE access_token = ? AND expires_at > now()', [match[1]])
      .then((rows) => {
        if (!rows[0]) return next(new PaypalError(401, [], 'Access Token not found in cache'));
        res.locals.walletpayClientId = rows[0].client_id;
        next();
      }, next);
  };
}
