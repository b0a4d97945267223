import type { Request, Response } from 'express';
import { initServer } from '@ts-rest/express';
import { ProviderSchema, contract, type Provider } from '../../../contract/index.js';
import type { InboundPipeline } from '../../domain/inbound/inbound-pipeline.js';
import type { InboundRequest } from '../../domain/ports.js';
import { countAsUnmatched } from '../middleware/callback-metrics.js';
import type { RawBodyRequest } from '../middleware/json-body.js';

const s = initServer();

/**
 * The callback exactly as received: raw bytes for signatures, headers lower-cased, and the client's
 * address (the socket's, or with TRUST_PROXY the one the trusted proxies forwarded).
 */
export function inboundRequest(req: Request, subpath = ''): InboundRequest {
  const headers: Record<string, string | undefined> = {};
  for (const [name, value] of Object.entries(req.headers)) headers[name] = Array.isArray(value) ? value.join(',') : value;
  const query: Record<string, string | undefined> = {};
  for (const [name, value] of Object.entries(req.query)) if (typeof value === 'string') query[name] = value;
  return {
    subpath,
    headers,
    rawBody: (req as RawBodyRequest).rawBody ?? Buffer.alloc(0),
    body: req.body,
    query,
    sourceIp: req.ip ?? req.socket.remoteAddress ?? '',
  };
}

const received = { status: 200 as const, body: { received: true as const } };

const CALLBACK_PATH = /^\/v1\/webhooks\/([a-z0-9]+)(\/.*)?$/;

/** The provider a callback path (`/v1/webhooks/<provider><subpath>`) is for; null for any other path. */
export function callbackProvider(path: string): Provider | null {
  const provider = ProviderSchema.safeParse(CALLBACK_PATH.exec(path)?.[1]);
  return provider.success ? provider.data : null;
}

/** `/v1/webhooks/<provider><subpath>`: which provider a callback route belongs to, and the part after it. */
function routeTarget(path: string): { provider: Provider; subpath: string } {
  const provider = callbackProvider(path);
  if (!provider) throw new Error(`callback route ${path} names no provider`);
  return { provider, subpath: CALLBACK_PATH.exec(path)![2] ?? '' };
}

/**
 * Every provider callback route of the contract hands the request to the one inbound pipeline, which
 * answers 200 unless it refuses the request (one naming nothing of ours, or of another provider account than
 * its payment's, is counted `unmatched`). Built from the contract's paths: a new provider's callback route
 * needs nothing here.
 */
export function providerCallbacksRouter(deps: { inbound: InboundPipeline }) {
  type Routes = typeof contract.providerCallbacks;
  const handlers = Object.fromEntries(
    (Object.keys(contract.providerCallbacks) as (keyof Routes)[]).map((key) => {
      const { provider, subpath } = routeTarget(contract.providerCallbacks[key].path);
      const handler = async ({ req, res }: { req: Request; res: Response }) => {
        const outcome = await deps.inbound.handle(provider, inboundRequest(req, subpath));
        // Acknowledged all the same: the provider must not send another integration's (or account's) events for ever.
        if (outcome === 'unknown_reference' || outcome === 'other_account') countAsUnmatched(res);
        return received;
      };
      return [key, handler];
    }),
  ) as { [K in keyof Routes]: (args: { req: Request; res: Response }) => Promise<typeof received> };
  return s.router(contract.providerCallbacks, handlers);
}
