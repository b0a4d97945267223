import type { Request } from 'express';
import { initServer } from '@ts-rest/express';
import { contract } from '../../../contract/index.js';
import type { CardpayCallbackService } from '../../domain/callbacks/cardpay-callback.service.js';
import type { WalletpayCallbackService } from '../../domain/callbacks/walletpay-callback.service.js';
import type { MobilemoneyCallbackService } from '../../domain/callbacks/mobilemoney-callback.service.js';
import type { InboundCallback } from '../../providers/types.js';
import type { RawBodyRequest } from '../app.js';

const s = initServer();

/**
 * The callback exactly as received: raw bytes for signatures, headers lower-cased, and the client's
 * address (the socket's, or with TRUST_PROXY the one the trusted proxies forwarded).
 */
export function inboundCallback(req: Request, subpath = ''): InboundCallback {
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

export function providerCallbacksRouter(deps: {
  cardpayCallbacks: CardpayCallbackService;
  walletpayCallbacks: WalletpayCallbackService;
  mobilemoneyCallbacks: MobilemoneyCallbackService;
}) {
  const mm = deps.mobilemoneyCallbacks;
  return s.router(contract.providerCallbacks, {
    cardpay: async ({ req }) => {
      await deps.cardpayCallbacks.handle(inboundCallback(req));
      return received;
    },
    walletpay: async ({ req }) => {
      await deps.walletpayCallbacks.handle(inboundCallback(req));
      return received;
    },
    mobilemoney: async ({ req }) => {
      await mm.handleStkResult(inboundCallback(req));
      return received;
    },
    mobilemoneyStatusResult: async ({ req }) => {
      await mm.handleStatusResult(inboundCallback(req, '/transactionstatus/result'));
      return received;
    },
    mobilemoneyStatusTimeout: async ({ req }) => {
      await mm.handleTimeout(inboundCallback(req, '/transactionstatus/timeout'), 'transactionstatus');
      return received;
    },
    mobilemoneyReversalResult: async ({ req }) => {
      await mm.handleReversalResult(inboundCallback(req, '/reversal/result'));
      return received;
    },
    mobilemoneyReversalTimeout: async ({ req }) => {
      await mm.handleTimeout(inboundCallback(req, '/reversal/timeout'), 'reversal');
      return received;
    },
  });
}
