import type { RequestHandler, Response } from 'express';
import { PROVIDERS } from '../../../contract/index.js';
import type { Metrics } from '../../observability/metrics.js';
import { onAnswerOver } from './answer-over.js';

const CALLBACK_PATH = new RegExp(`^/v1/webhooks/(${PROVIDERS.join('|')})(/|$)`);

/**
 * The `outcome` label of provider_callbacks_total: answered 2xx (`accepted`; `unmatched`, acknowledged
 * though it names no payment or refund of ours), 4xx, 5xx.
 */
export const CALLBACK_OUTCOMES = ['accepted', 'unmatched', 'rejected', 'failed'] as const;
type CallbackOutcome = (typeof CALLBACK_OUTCOMES)[number];

/**
 * Marks a callback answered 2xx that named nothing of ours (another integration's event on a shared
 * provider account, one for a payment long gone, an event of another provider account than its payment
 * was created on): acknowledged so the provider stops sending it, but not `accepted`, which would hide
 * that nothing was applied.
 */
export function countAsUnmatched(res: Response): void {
  res.locals.callbackUnmatched = true;
}

/**
 * Counts provider callbacks (/v1/webhooks/<provider>…) by how they were answered (also one whose sender
 * hung up before the answer: onAnswerOver). Every series starts at
 * 0: Prometheus's rate() reads a series that first appears at 1 as no change, so the first failed callback
 * of a process would never fire PaymentsCallbacksFailing.
 */
export function callbackMetrics(metrics: Metrics): RequestHandler {
  for (const provider of PROVIDERS) for (const outcome of CALLBACK_OUTCOMES) metrics.providerCallbacks.inc({ provider, outcome }, 0);
  return (req, res, next) => {
    const provider = CALLBACK_PATH.exec(req.path)?.[1];
    if (provider) {
      onAnswerOver(req, res, ({ status }) => {
        const answered: CallbackOutcome = status < 400 ? 'accepted' : status < 500 ? 'rejected' : 'failed';
        const outcome = answered === 'accepted' && res.locals.callbackUnmatched === true ? 'unmatched' : answered;
        metrics.providerCallbacks.inc({ provider, outcome });
      });
    }
    next();
  };
}
