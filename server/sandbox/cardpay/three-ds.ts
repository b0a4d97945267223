import type { NextFunction, Request, Response, Router } from 'express';
import { displayAmount } from './currencies.js';
import type { SandboxDeps } from '../module.js';
import { readsOnly, unitOfWork } from '../sql.js';
import { authenticate } from './charging.js';
import { eventJobs } from './events.js';
import { commitWithJobs } from './jobs.js';
import type { IntentRow } from './objects.js';
import { findIntentForAuthentication, paymentMethodById, saveIntentState, saveSetUp } from './store.js';

const escape = (s: string) => s.replace(/[&<>"']/g, (c) => `&#${c.charCodeAt(0)};`);

function page(title: string, body: string): string {
  return `<!doctype html><html lang="en"><head><meta charset="utf-8"><title>${escape(title)}</title>
<meta name="viewport" content="width=device-width, initial-scale=1">
<style>body{font-family:system-ui,sans-serif;background:#f3f4f6;color:#111827;margin:0;padding:3rem 1rem}
main{max-width:26rem;margin:0 auto;background:#fff;border:1px solid #e5e7eb;border-radius:.75rem;padding:1.5rem 1.75rem;box-shadow:0 1px 3px rgba(0,0,0,.08)}
.bank{margin:0 0 1rem;font-size:.85rem;letter-spacing:.04em;text-transform:uppercase;color:#6b7280}
h1{font-size:1.4rem;margin:0 0 .75rem}.amount{font-size:1.6rem;font-weight:600;margin:.5rem 0}code{font-size:.85rem;color:#4b5563}
.actions{display:flex;gap:.75rem;margin-top:1.5rem}.actions form{flex:1}
button{width:100%;font-size:1rem;padding:.65rem 1rem;border-radius:.5rem;border:1px solid #d1d5db;background:#fff;cursor:pointer}
button.primary{background:#1d4ed8;border-color:#1d4ed8;color:#fff}</style>
</head><body><main><p class="bank">cardpay test bank &middot; 3-D Secure</p>${body}</main></body></html>`;
}

/** Where the browser goes after authentication: the intent's return_url with Stripe's query parameters. */
function returnTarget(intent: IntentRow): string | null {
  if (!intent.return_url) return null;
  const url = new URL(intent.return_url);
  url.searchParams.set('payment_intent', intent.id);
  url.searchParams.set('payment_intent_client_secret', intent.client_secret);
  url.searchParams.set('redirect_status', intent.status === 'succeeded' ? 'succeeded' : 'failed');
  return url.toString();
}

/** The page's secret, `?client_secret=` of its URL (payment-intents.ts authenticationUrl). */
const secretOf = (req: Request): string | undefined => (typeof req.query.client_secret === 'string' ? req.query.client_secret : undefined);

/** Settles a requires_action intent (once; a second settlement changes nothing), committed with its events. */
function settle(deps: SandboxDeps, id: string, secret: string | undefined, result: 'complete' | 'fail'): Promise<IntentRow | null> {
  return unitOfWork(deps.pool, async (work) => {
    const intent = await findIntentForAuthentication(work, id, secret);
    if (!intent || intent.status !== 'requires_action') return intent;
    const pm = await paymentMethodById(work, intent.payment_method);
    if (!pm) throw new Error(`intent ${id} requires action without a payment method`);
    const { events, setUp } = authenticate(intent, pm, result);
    if (setUp) await saveSetUp(work, setUp);
    saveIntentState(work, intent);
    await commitWithJobs(work, [eventJobs(deps, intent.account, events, null)]);
    return intent;
  });
}

/**
 * The cardholder's 3-D Secure page (no API key: it is opened by a browser), at the URL the intent answered
 * in next_action: its id and its secret (`?client_secret=`); the id alone, or another secret, is an
 * unknown page (404) and settles nothing. "Complete" and "Fail" buttons, or `&auto=complete|fail` to
 * settle without a browser; then a 302 to the intent's return_url.
 */
export function threeDsRoutes(router: Router, deps: SandboxDeps): void {
  const finish = async (req: Request, res: Response, result: 'complete' | 'fail') => {
    const intent = await settle(deps, req.params.id!, secretOf(req), result);
    if (!intent) return res.status(404).type('html').send(page('Not found', '<h1>Unknown payment</h1>'));
    const target = returnTarget(intent);
    if (target) return res.redirect(302, target);
    const done = intent.status === 'succeeded' ? 'Authentication complete: the payment succeeded.' : 'The payment was not completed.';
    return res.type('html').send(page('3-D Secure', `<h1>${escape(done)}</h1><p>You can close this window.</p>`));
  };
  const handle = (fn: (req: Request, res: Response) => Promise<unknown>) => (req: Request, res: Response, next: NextFunction) =>
    fn(req, res).catch((err: unknown) => {
      deps.logger.error({ err: { type: (err as Error).name, message: (err as Error).message } }, 'cardpay simulator 3DS page error');
      if (!res.headersSent) res.status(500).type('html').send(page('Error', '<h1>Something went wrong</h1>'));
      else next(err);
    });

  router.get(
    '/3ds/:id',
    handle(async (req, res) => {
      const auto = req.query.auto;
      if (auto === 'complete' || auto === 'fail') return finish(req, res, auto);
      const secret = secretOf(req);
      const intent = await findIntentForAuthentication(readsOnly(deps.pool), req.params.id!, secret);
      if (!intent) return res.status(404).type('html').send(page('Not found', '<h1>Unknown payment</h1>'));
      const id = escape(intent.id);
      const query = `?client_secret=${escape(encodeURIComponent(secret!))}`;
      // The intent's amount is in the API's units (currencies.ts), not ISO minor units.
      const amount = `${escape(displayAmount(BigInt(intent.amount), intent.currency))} ${escape(intent.currency.toUpperCase())}`;
      if (intent.status !== 'requires_action') {
        return res.type('html').send(page('3-D Secure', `<h1>Nothing to authenticate</h1><p>Payment ${id} is ${escape(intent.status)}.</p>`));
      }
      return res.type('html').send(
        page(
          '3-D Secure authentication',
          `<h1>Authenticate this payment</h1><p class="amount">${amount}</p><p>Payment <code>${id}</code></p>
<p>This sandbox bank asks you to choose the authentication outcome.</p>
<div class="actions"><form method="post" action="${id}/complete${query}"><button type="submit" class="primary">Complete</button></form>
<form method="post" action="${id}/fail${query}"><button type="submit">Fail</button></form></div>`,
        ),
      );
    }),
  );
  router.post('/3ds/:id/complete', handle((req, res) => finish(req, res, 'complete')));
  router.post('/3ds/:id/fail', handle((req, res) => finish(req, res, 'fail')));
}
