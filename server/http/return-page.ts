import type { Express, Request, Response } from 'express';
import { CARDPAY_RETURN_PATH } from '../lib/return-page.js';

const PAGE = `<!doctype html><html lang="en"><head><meta charset="utf-8"><title>Payment</title>
<meta name="viewport" content="width=device-width, initial-scale=1">
<style>body{font-family:system-ui,sans-serif;background:#f3f4f6;color:#111827;margin:0;padding:3rem 1rem}
main{max-width:26rem;margin:0 auto;background:#fff;border:1px solid #e5e7eb;border-radius:.75rem;padding:1.5rem 1.75rem}
h1{font-size:1.3rem;margin:0 0 .75rem}</style></head><body><main>
<h1>Authentication finished</h1><p>Your bank has answered. The shop will confirm the payment's outcome; you can close this window.</p>
</main></body></html>`;

/**
 * The return page for cardholders coming back from 3-D Secure when the merchant gave no return_url. It
 * states nothing about the outcome: the query string is not trusted (anyone can type it); the payment's
 * status comes from the provider's verified callback or the status sync.
 */
export function mountReturnPage(app: Express): void {
  app.get(CARDPAY_RETURN_PATH, (_req: Request, res: Response) => {
    res.set('Cache-Control', 'no-store').set('Referrer-Policy', 'no-referrer').type('html').send(PAGE);
  });
}
