import { randomUUID } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import type { Browser, BrowserContext, Locator, Page } from 'playwright-core';
import { WebhookReceiver, waitFor } from '../delivery/receiver.js';
import { startTestService, type TestService } from '../support/service.js';
import { launchChromium, screenshot } from './chromium.js';

/**
 * The merchant dashboard (/dashboard) in a real Chromium against the real service: sign in with an
 * API key, filter payments, open one, refund it and see the event delivered, resend a dead delivery,
 * send a test event, and read the settings — at 1280 and 390 px wide.
 */

let t: TestService;
let receiver: WebhookReceiver;
let browser: Browser;
let context: BrowserContext;
let merchant: { merchantId: string; apiKey: string };
const payments: Record<string, string> = {};

async function pay(paymentMethod: string, amount: string, metadata?: Record<string, string>) {
  const res = await t.http.post('/v1/payments').set('X-API-Key', merchant.apiKey).set('Idempotency-Key', `dash-${randomUUID()}`)
    .send({ provider: 'cardpay', amount, currency: 'USD', payment_method: paymentMethod, ...(metadata ? { metadata } : {}) });
  expect(res.status).toBe(201);
  return res.body.data.id as string;
}

const deliveryStatus = async (paymentId: string, type: string) => {
  const [row] = await t.sql<{ id: string; status: string }>('SELECT id, status FROM webhook_deliveries WHERE payment_id = $1 AND event_type = $2', [paymentId, type]);
  return row;
};

async function newPage(width: number): Promise<Page> {
  const page = await context.newPage();
  await page.setViewportSize({ width, height: width > 800 ? 860 : 844 });
  page.setDefaultTimeout(15_000);
  return page;
}

async function signIn(page: Page) {
  await page.goto(`${t.baseUrl}/dashboard`);
  await page.getByLabel('API key').fill(merchant.apiKey);
  await page.getByRole('button', { name: 'Sign in' }).click();
  await page.getByRole('heading', { name: 'Payments', level: 1 }).waitFor();
}

/**
 * A merchant of `short` (the service below that forgets refund keys after 8 s) with a completed 20.00 USD
 * cardpay payment, and that payment's refunds as the API lists them.
 */
async function shortKeyMerchant(short: TestService, merchantName: string, secretKey: string) {
  // Whatever an earlier test left the simulator in, this payment is answered.
  await short.http.post('/sandbox/cardpay/_control/outage').send({ mode: 'ok' }).expect(200);
  const { apiKey } = await short.createMerchant(merchantName);
  await short.http.put('/v1/merchant/credentials').set('X-API-Key', apiKey).send({ provider: 'cardpay', cardpay: { secret_key: secretKey } }).expect(200);
  const created = await short.http.post('/v1/payments').set('X-API-Key', apiKey).set('Idempotency-Key', `dash-${randomUUID()}`)
    .send({ provider: 'cardpay', amount: '20.00', currency: 'USD', payment_method: 'pm_card_visa' }).expect(201);
  const paymentId = created.body.data.id as string;
  const refunds = async () => (await short.http.get('/v1/refunds').query({ payment_id: paymentId }).set('X-API-Key', apiKey).expect(200)).body.data as { amount: string; status: string }[];
  return { apiKey, paymentId, refunds };
}

/** Opens the payment's page on `baseUrl`'s dashboard, signing in with `apiKey` there. */
async function signedInAtPayment(page: Page, baseUrl: string, apiKey: string, paymentId: string) {
  await page.goto(`${baseUrl}/dashboard/#/payments/${paymentId}`);
  await page.getByLabel('API key').fill(apiKey);
  await page.getByRole('button', { name: 'Sign in' }).click();
  await page.getByRole('heading', { name: 'Payment 20.00 USD' }).waitFor();
}

/** Waits until `short` has pruned the Idempotency-Key `key`: the same key sent now would be a new request. */
const keyPruned = (short: TestService, key: string) =>
  waitFor(async () => (await short.sql('SELECT 1 FROM idempotency_keys WHERE key = $1', [key])).length === 0, 'the refund key pruned', 30_000);

/** Waits until the page shows this text (announcements, outcomes). */
const shows = (page: Page, text: string | RegExp) => page.getByText(text).first().waitFor();
/** The answer the service gives when the provider may have acted and the outcome could not be recorded (for page.route to fulfil). */
const outcomeUnknown = (status: number, code: string, message: string) => ({
  status,
  contentType: 'application/json',
  headers: { 'Payments-Outcome': 'unknown' },
  body: JSON.stringify({ success: false, error: { code, message, request_id: `r${status}` } }),
});
/**
 * Runs `action` (a click or a navigation that changes the address) and waits until the router has
 * rendered the new view: the form that was on the page is gone. The router renders on `hashchange`, a
 * task that may run after Playwright's click returns; filling in fields before it would type into the
 * form about to be replaced.
 */
async function rerendered(page: Page, action: () => Promise<unknown>) {
  const form = await page.locator('form.filters').elementHandle();
  await action();
  await page.waitForFunction((el) => !el?.isConnected, form);
}

/** The payment ids the list shows, in order. */
const listedIds = async (page: Page) =>
  page.locator('tbody tr a[aria-label^="Payment "]').evaluateAll((links) => links.map((a) => a.getAttribute('aria-label')!.slice('Payment '.length)));

beforeAll(async () => {
  browser = await launchChromium();
  context = await browser.newContext();
  receiver = await new WebhookReceiver().start();
  t = await startTestService({ WEBHOOK_RETRY_SCHEDULE: '100ms,100ms' });
  merchant = await t.createMerchant('Dashboard Coffee Roasters');
  await t.http.put('/v1/merchant/credentials').set('X-API-Key', merchant.apiKey).send({ provider: 'cardpay', cardpay: { secret_key: 'sk_test_dashboard_0001' } }).expect(200);
  await t.http.put('/v1/merchant/webhook').set('X-API-Key', merchant.apiKey).send({ webhook_url: receiver.url('/hooks') }).expect(200);

  // The first payment's event finds the endpoint down until it is dead.
  receiver.alwaysFail('/hooks', 503);
  payments.deadDelivery = await pay('pm_card_visa', '12.00');
  await waitFor(async () => (await deliveryStatus(payments.deadDelivery!, 'payment.completed'))?.status === 'dead', 'a dead delivery');
  receiver.succeed('/hooks');
  payments.declined = await pay('pm_card_chargeDeclined', '30.00');
  payments.small = await pay('pm_card_visa', '8.50');
  // Merchant-supplied text, markup included: shown as text.
  payments.large = await pay('pm_card_mastercard', '149.99', { order_id: '1042', note: '<b>gift</b> wrap' });
}, 60_000);

afterAll(async () => {
  await context?.close();
  await browser?.close();
  await t?.stop();
  await receiver?.stop();
});

describe('merchant dashboard', () => {
  it('refuses a wrong key with the API error, and keeps a good one in session storage only', async () => {
    const page = await newPage(1280);
    const elsewhere: string[] = [];
    page.on('request', (req) => {
      if (!req.url().startsWith(t.baseUrl)) elsewhere.push(req.url());
    });
    const response = await page.goto(`${t.baseUrl}/dashboard/`);
    expect(response?.headers()['content-security-policy']).toContain("script-src 'self'");
    await page.getByLabel('API key').fill('pk_not_a_real_key');
    await page.getByRole('button', { name: 'Sign in' }).click();
    await page.getByRole('alert').waitFor();
    await expect(page.getByRole('alert').innerText()).resolves.toMatch(/UNAUTHORIZED/);

    await page.getByLabel('API key').fill(merchant.apiKey);
    await page.keyboard.press('Enter');
    await page.getByRole('heading', { name: 'Payments', level: 1 }).waitFor();
    const stored = await page.evaluate(() => ({ session: Object.values(sessionStorage), local: Object.keys(localStorage), cookie: document.cookie }));
    expect(stored).toEqual({ session: [merchant.apiKey], local: [], cookie: '' });
    expect(elsewhere).toEqual([]); // nothing from the network: npm start works offline
    await page.locator('#merchant-name', { hasText: 'Dashboard Coffee Roasters' }).waitFor();
    await page.close();
  });

  it('signed out, shows neither the navigation nor Sign out; signed in it does, and after Sign out they are hidden again', async () => {
    const page = await newPage(1280);
    await page.goto(`${t.baseUrl}/dashboard/`);
    await page.getByLabel('API key').waitFor();
    const signOut = page.getByRole('button', { name: 'Sign out' });
    const refundsLink = page.locator('#nav a', { hasText: 'Refunds' });
    expect([await signOut.isVisible(), await refundsLink.isVisible()]).toEqual([false, false]);
    await page.getByLabel('API key').fill(merchant.apiKey);
    await page.getByRole('button', { name: 'Sign in' }).click();
    await page.getByRole('heading', { name: 'Payments', level: 1 }).waitFor();
    expect([await signOut.isVisible(), await refundsLink.isVisible()]).toEqual([true, true]);
    await signOut.click();
    await page.getByLabel('API key').waitFor();
    expect([await signOut.isVisible(), await refundsLink.isVisible()]).toEqual([false, false]);
    await page.close();
  });

  it('signing in from a bookmarked address shows that page; Clear with no filter set draws the list again', async () => {
    for (const [hash, heading] of [['payments', 'Payments'], ['settings', 'Settings']] as const) {
      const page = await newPage(1280);
      await page.goto(`${t.baseUrl}/dashboard/#/${hash}`);
      await page.getByLabel('API key').fill(merchant.apiKey);
      await page.getByRole('button', { name: 'Sign in' }).click();
      await page.getByRole('heading', { name: heading, level: 1 }).waitFor();
      expect(new URL(page.url()).hash).toBe(`#/${hash}`);
      if (hash === 'payments') {
        await page.locator('tbody tr').first().waitFor();
        // The address does not change: the list is read and drawn again all the same.
        const read = page.waitForRequest((req) => new URL(req.url()).pathname === '/v1/payments');
        await rerendered(page, () => page.getByRole('button', { name: 'Clear' }).click());
        await read;
      }
      await page.close();
    }
  });

  it('lists payments, filters them, pages, and shows a filter error from the envelope', async () => {
    const page = await newPage(1280);
    await signIn(page);
    await expect(listedIds(page)).resolves.toEqual([payments.large, payments.small, payments.declined, payments.deadDelivery]);
    await screenshot(page, 'dashboard-payments-1280', { fullPage: false });

    await page.getByLabel('Status').selectOption('failed');
    await page.getByRole('button', { name: 'Apply filters' }).click();
    await page.waitForURL(/status=failed/);
    await waitFor(async () => JSON.stringify(await listedIds(page)) === JSON.stringify([payments.declined]), 'the failed filter');

    await rerendered(page, () => page.getByRole('button', { name: 'Clear' }).click());
    await page.getByLabel('Min amount').fill('10');
    await page.getByLabel('Max amount').fill('100');
    await page.getByLabel('Provider').selectOption('cardpay');
    await page.getByRole('button', { name: 'Apply filters' }).click();
    await waitFor(async () => JSON.stringify(await listedIds(page)) === JSON.stringify([payments.declined, payments.deadDelivery]), 'the amount filter');
    await shows(page, 'Page 1 of 1 · 2 payments');

    await rerendered(page, () => page.goto(`${t.baseUrl}/dashboard/#/payments?page_size=1`));
    await rerendered(page, () => page.getByRole('button', { name: 'Clear' }).click());
    await page.getByLabel('Currency').fill('US');
    await page.getByRole('button', { name: 'Apply filters' }).click();
    const alert = page.getByRole('alert');
    await alert.waitFor();
    await expect(alert.innerText()).resolves.toMatch(/VALIDATION_ERROR[\s\S]*currency/);
    await page.close();
  });

  it('opens a payment, refunds it, and shows the refund event delivered', async () => {
    const page = await newPage(1280);
    await signIn(page);
    await page.getByRole('link', { name: `Payment ${payments.large}` }).click();
    await page.getByRole('heading', { name: 'Payment 149.99 USD' }).waitFor();
    await expect(page.locator('dl.summary').innerText()).resolves.toContain('completed');
    // The merchant's metadata by key, as text: the markup in it is not rendered.
    await expect(page.locator('dl.summary ul.metadata').innerText()).resolves.toBe('note <b>gift</b> wrap\norder_id 1042');
    await expect(page.locator('dl.summary b').count()).resolves.toBe(0);

    await page.getByLabel('Refund amount (empty = the rest)').fill('49.99');
    await page.getByRole('button', { name: 'Refund' }).click();
    await shows(page, 'Refund of 49.99 USD is completed.');
    await page.getByRole('button', { name: 'Refund' }).click(); // the rest
    await page.locator('dl.summary', { hasText: 'refunded' }).waitFor();

    await waitFor(async () => {
      const rows = await t.sql<{ status: string }>(`SELECT status FROM webhook_deliveries WHERE payment_id = $1 AND event_type = 'payment.refunded'`, [payments.large]);
      return rows.length === 2 && rows.every((r) => r.status === 'delivered');
    }, 'both refund events delivered');
    await page.reload();
    const deliveries = page.locator('h2:text("Webhook deliveries") + div table');
    await deliveries.locator('tr', { hasText: 'payment.refunded' }).first().waitFor();
    const refundRows = await deliveries.locator('tr', { hasText: 'payment.refunded' }).allInnerTexts();
    expect(refundRows).toEqual([expect.stringContaining('delivered'), expect.stringContaining('delivered')]);
    const transitions = await page.locator('h2:text("Transitions") + div table tbody tr').allInnerTexts();
    // A refund completes by the refund call's answer or, when the simulator's refund.created callback
    // lands first (a loaded machine), by that callback: either is the same move.
    const byRefund = '(refund|callback:refund\\.\\w+)';
    expect(transitions.map((row) => row.replace(/\s+/g, ' '))).toEqual([
      expect.stringMatching(/payment — pending create yes/),
      expect.stringMatching(/payment pending completed create yes/),
      expect.stringMatching(new RegExp(`refund \\w{8}… pending completed ${byRefund} yes`)),
      expect.stringMatching(new RegExp(`refund \\w{8}… pending completed ${byRefund} yes`)),
      expect.stringMatching(new RegExp(`payment completed refunded ${byRefund} yes`)),
    ]);
    const events = await page.locator('h2:text("Events") + div table tbody tr').allInnerTexts();
    expect(events.join('\n')).toMatch(/payment\.refunded[\s\S]*payment\.refunded[\s\S]*payment\.completed/);
    const attempts = deliveries.locator('tr', { hasText: 'payment.completed' }).getByText('Attempts (1)');
    await attempts.click();
    await deliveries.locator('tr', { hasText: 'payment.completed' }).locator('ol').waitFor();
    await expect(deliveries.locator('tr', { hasText: 'payment.completed' }).locator('ol').innerText()).resolves.toMatch(/scheduled · HTTP 200/);
    await screenshot(page, 'dashboard-payment-1280');
    await page.close();
  });

  it('lists every refund, newest first with its payment, and filters them by status', async () => {
    const page = await newPage(1280);
    await signIn(page);
    await rerendered(page, () => page.getByRole('navigation', { name: 'Main' }).getByRole('link', { name: 'Refunds' }).click());
    await page.getByRole('heading', { name: 'Refunds', level: 1 }).waitFor();
    await shows(page, 'Page 1 of 1 · 2 refunds');
    // The two refunds of the previous test: the rest (100.00), then the first part (49.99).
    const rows = (await page.locator('tbody tr').allInnerTexts()).map((row) => row.replace(/\s+/g, ' '));
    expect(rows).toEqual([expect.stringMatching(/100\.00 USD completed re_/), expect.stringMatching(/49\.99 USD completed re_/)]);

    await page.getByLabel('Status').selectOption('failed');
    await page.getByRole('button', { name: 'Apply filters' }).click();
    await page.waitForURL(/refunds\?status=failed/);
    await shows(page, 'Page 1 of 1 · 0 refunds');
    await shows(page, 'Nothing to show.');

    await rerendered(page, () => page.getByRole('button', { name: 'Clear' }).click());
    await page.getByRole('link', { name: `Payment ${payments.large}` }).first().click();
    await page.getByRole('heading', { name: 'Payment 149.99 USD' }).waitFor();
    await page.close();
  });

  it('a refund whose answer was lost, clicked again, sends the same Idempotency-Key: one refund; the next refund gets a new key', async () => {
    const paymentId = await pay('pm_card_visa', '20.00');
    const page = await newPage(1280);
    await signIn(page);
    const sentKeys: (string | undefined)[] = [];
    let loseNextAnswer = true;
    await page.route((url) => url.pathname === '/v1/refunds', async (route) => {
      if (route.request().method() !== 'POST') return route.continue();
      sentKeys.push(route.request().headers()['idempotency-key']);
      if (!loseNextAnswer) return route.continue();
      // The request reaches the service and is carried out; its answer never reaches the page.
      loseNextAnswer = false;
      await route.fetch();
      return route.abort('connectionreset');
    });
    await page.goto(`${t.baseUrl}/dashboard/#/payments/${paymentId}`);
    await page.getByRole('heading', { name: 'Payment 20.00 USD' }).waitFor();
    await page.getByLabel('Refund amount (empty = the rest)').fill('5.00');
    await page.getByRole('button', { name: 'Refund' }).click();
    await page.getByRole('alert').waitFor();
    const lostAnswerMessage = await page.getByRole('alert').innerText();

    await page.getByRole('button', { name: 'Refund' }).click();
    await shows(page, 'The earlier refund of 5.00 USD is completed; no second refund was made.');
    expect(sentKeys).toHaveLength(2);
    expect(sentKeys[0]).toMatch(/^[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$/);
    expect(sentKeys[1]).toBe(sentKeys[0]); // without a key the second click refunded again
    const refunds = async () => (await t.http.get('/v1/refunds').query({ payment_id: paymentId }).set('X-API-Key', merchant.apiKey).expect(200)).body.data as { amount: string }[];
    expect((await refunds()).map((r) => r.amount)).toEqual(['5.00']);
    // The page said so: not "check your connection and try again" as for a request that changes nothing.
    expect(lostAnswerMessage).toMatch(/NETWORK_ERROR: No answer came back.*Trying again is safe/);

    // After a success the form is a new request: the rest is refunded under a new key.
    await page.getByRole('button', { name: 'Refund' }).click();
    await shows(page, 'Refund of 15.00 USD is completed.');
    expect(sentKeys).toHaveLength(3);
    expect(sentKeys[2]).not.toBe(sentKeys[0]);
    expect((await refunds()).map((r) => r.amount)).toEqual(['5.00', '15.00']);
    await page.close();
  });

  /**
   * A 20.00 USD card payment's page, signed in, recording the Idempotency-Key of every refund the page
   * POSTs; `refunds()` lists the payment's refunds through the API.
   */
  const openPaidPaymentPage = async () => {
    const paymentId = await pay('pm_card_visa', '20.00');
    const page = await newPage(1280);
    await signIn(page);
    const sentKeys: (string | undefined)[] = [];
    await page.route((url) => url.pathname === '/v1/refunds', async (route) => {
      if (route.request().method() === 'POST') sentKeys.push(route.request().headers()['idempotency-key']);
      return route.continue();
    });
    await page.goto(`${t.baseUrl}/dashboard/#/payments/${paymentId}`);
    await page.getByRole('heading', { name: 'Payment 20.00 USD' }).waitFor();
    const refunds = async () => (await t.http.get('/v1/refunds').query({ payment_id: paymentId }).set('X-API-Key', merchant.apiKey).expect(200)).body.data as { id: string; amount: string; status: string }[];
    return { page, sentKeys, refunds };
  };

  /** While the provider does not answer: 5.00 refunded on the page, shown pending, and the page redrawn with it. */
  const refundUnanswered = async (page: Page, refundRows: Locator) => {
    await page.getByLabel('Refund amount (empty = the rest)').fill('5.00');
    await page.getByRole('button', { name: 'Refund' }).click();
    await shows(page, 'Refund of 5.00 USD is pending until the provider confirms it.');
    await refundRows.filter({ hasText: '5.00 USD' }).waitFor();
  };

  it('a refund the provider does not answer is shown pending, and the next click shows it again: one refund, not a second', async () => {
    const { page, sentKeys, refunds } = await openPaidPaymentPage();
    const refundRows = page.locator('h2:text("Refunds") + div table tbody tr');
    await t.http.post('/sandbox/cardpay/_control/outage').send({ mode: 'error' }).expect(200);
    try {
      // Not an error ("nothing happened"): the refund is made, pending until the provider confirms it.
      await refundUnanswered(page, refundRows);
      expect((await refundRows.allInnerTexts()).map((row) => row.replace(/\s+/g, ' '))).toEqual([expect.stringMatching(/5\.00 USD pending/)]);
      await expect(page.getByRole('alert').count()).resolves.toBe(0);
      const [made] = await refunds();
      expect(made).toMatchObject({ amount: '5.00', status: 'pending' });

      // The merchant clicks again: the same request (its key), answered with that refund; no second one.
      await page.getByLabel('Refund amount (empty = the rest)').fill('5.00');
      const [again] = await Promise.all([
        page.waitForResponse((res) => new URL(res.url()).pathname === '/v1/refunds' && res.request().method() === 'POST'),
        page.getByRole('button', { name: 'Refund' }).click(),
      ]);
      expect([again.status(), again.headers()['idempotent-replayed']]).toEqual([201, 'true']);
      expect((await again.json()).data).toMatchObject({ id: made!.id, status: 'pending' });
      await shows(page, 'The earlier refund of 5.00 USD is still pending until the provider confirms it; no second refund was made.');
      expect(sentKeys).toHaveLength(2);
      expect(sentKeys[1]).toBe(sentKeys[0]);
      expect(await refunds()).toEqual([expect.objectContaining({ id: made!.id, amount: '5.00' })]);
    } finally {
      await t.http.post('/sandbox/cardpay/_control/outage').send({ mode: 'ok' }).expect(200);
    }
    await page.close();
  });

  it('when the pending refund cannot be read back (403: a key without refunds:read), the next clicks still replay it: no second refund', async () => {
    const { page, sentKeys, refunds } = await openPaidPaymentPage();
    // The dashboard's read of one refund is refused, as for a key without refunds:read.
    await page.route((url) => url.pathname.startsWith('/v1/refunds/'), (route) =>
      route.fulfill({ status: 403, contentType: 'application/json', body: JSON.stringify({ success: false, error: { code: 'FORBIDDEN', message: 'this API key lacks the refunds:read scope', request_id: 'r2' } }) }));
    /** Clicks Refund for 5.00 and waits for its POST's answer and for the page redrawn after it (its refunds listed again). */
    const refundFive = async () => {
      await page.getByLabel('Refund amount (empty = the rest)').fill('5.00');
      const redrawn = page.waitForResponse((res) => new URL(res.url()).pathname === '/v1/refunds' && res.request().method() === 'GET');
      const [answer] = await Promise.all([
        page.waitForResponse((res) => new URL(res.url()).pathname === '/v1/refunds' && res.request().method() === 'POST'),
        page.getByRole('button', { name: 'Refund' }).click(),
      ]);
      await redrawn;
      // The new drawing is in place once its Refund button is there (the clicked one stays disabled): typing
      // the next amount before would go into the form about to be replaced.
      await waitFor(async () => page.getByRole('button', { name: 'Refund' }).isEnabled(), 'the page redrawn');
      return answer;
    };
    await t.http.post('/sandbox/cardpay/_control/outage').send({ mode: 'error' }).expect(200);
    try {
      for (let click = 1; click <= 3; click++) {
        const answer = await refundFive();
        expect(answer.status()).toBe(201);
        expect((await answer.json()).data).toMatchObject({ amount: '5.00', status: 'pending' });
      }
      expect(sentKeys).toHaveLength(3);
      expect(new Set(sentKeys).size).toBe(1);
      expect(await refunds()).toHaveLength(1);
    } finally {
      await t.http.post('/sandbox/cardpay/_control/outage').send({ mode: 'ok' }).expect(200);
    }
    await page.close();
  });

  it('once the pending refund has settled, the same amount clicked again is a second refund with a new key, not a replay of the first', async () => {
    const { page, sentKeys, refunds } = await openPaidPaymentPage();
    const refundRows = page.locator('h2:text("Refunds") + div table tbody tr');
    await t.http.post('/sandbox/cardpay/_control/outage').send({ mode: 'error' }).expect(200);
    try {
      await refundUnanswered(page, refundRows);
    } finally {
      await t.http.post('/sandbox/cardpay/_control/outage').send({ mode: 'ok' }).expect(200);
    }
    // The provider is back; the refund sync sends the refund again and it completes.
    const [first] = await refunds();
    await t.inContext(() => t.service.container.services.refundSync.syncOne(first!.id));
    expect(await refunds()).toEqual([expect.objectContaining({ id: first!.id, amount: '5.00', status: 'completed' })]);

    // The merchant means a second partial refund of 5.00: it is made, under a new key.
    await page.getByLabel('Refund amount (empty = the rest)').fill('5.00');
    const [second] = await Promise.all([
      page.waitForResponse((res) => new URL(res.url()).pathname === '/v1/refunds' && res.request().method() === 'POST'),
      page.getByRole('button', { name: 'Refund' }).click(),
    ]);
    expect([second.status(), second.headers()['idempotent-replayed']]).toEqual([201, undefined]);
    await shows(page, 'Refund of 5.00 USD is completed.');
    expect(sentKeys).toHaveLength(2);
    expect(sentKeys[1]).not.toBe(sentKeys[0]); // the kept key replayed the first: "completed", and no second refund
    const made = await refunds();
    expect(made).toHaveLength(2);
    expect(made.map((r) => [r.amount, r.status])).toEqual([['5.00', 'completed'], ['5.00', 'completed']]);
    await refundRows.nth(1).waitFor(); // the page redrawn with both
    expect((await refundRows.allInnerTexts()).map((row) => row.replace(/\s+/g, ' '))).toEqual([expect.stringMatching(/5\.00 USD completed/), expect.stringMatching(/5\.00 USD completed/)]);
    await page.close();
  });

  it('a refund answered 500 with Payments-Outcome: unknown, clicked again, sends the same Idempotency-Key: one refund', async () => {
    const paymentId = await pay('pm_card_visa', '20.00');
    const page = await newPage(1280);
    await signIn(page);
    const sentKeys: (string | undefined)[] = [];
    let first = true;
    await page.route((url) => url.pathname === '/v1/refunds', async (route) => {
      if (route.request().method() !== 'POST') return route.continue();
      sentKeys.push(route.request().headers()['idempotency-key']);
      if (!first) return route.continue();
      // The refund is made, but the page is told what the service answers when it could not record it.
      first = false;
      await route.fetch();
      return route.fulfill(outcomeUnknown(500, 'INTERNAL_ERROR', 'The provider may have acted on this request'));
    });
    await page.goto(`${t.baseUrl}/dashboard/#/payments/${paymentId}`);
    await page.getByRole('heading', { name: 'Payment 20.00 USD' }).waitFor();
    await page.getByLabel('Refund amount (empty = the rest)').fill('5.00');
    await page.getByRole('button', { name: 'Refund' }).click();
    await shows(page, 'The provider may have acted on this request');
    // And the page says what the merchant may do: the same click again is the same request.
    await shows(page, 'This may have been done already. Trying again is safe');

    await page.getByRole('button', { name: 'Refund' }).click();
    await shows(page, 'The earlier refund of 5.00 USD is completed; no second refund was made.');
    expect(sentKeys).toHaveLength(2);
    expect(sentKeys[1]).toBe(sentKeys[0]); // a new key would have refunded 5.00 again
    const refunds = (await t.http.get('/v1/refunds').query({ payment_id: paymentId }).set('X-API-Key', merchant.apiKey).expect(200)).body.data as { amount: string }[];
    expect(refunds.map((r) => r.amount)).toEqual(['5.00']);
    await page.close();
  });

  it("after the service's final refusal, or with another amount, the next click is a new request with a new key (the old key would replay the refusal or answer 409)", async () => {
    const paymentId = await pay('pm_card_visa', '20.00');
    const page = await newPage(1280);
    await signIn(page);
    const sent: { key: string | undefined; body: string | null }[] = [];
    let next: 'refuse' | 'lose' | 'pass' = 'refuse';
    await page.route((url) => url.pathname === '/v1/refunds', async (route) => {
      if (route.request().method() !== 'POST') return route.continue();
      sent.push({ key: route.request().headers()['idempotency-key'], body: route.request().postData() });
      const now = next;
      if (now === 'refuse') {
        // The service's own final answer (as it stores and replays a provider's refusal for the key).
        next = 'lose';
        return route.fulfill({ status: 502, contentType: 'application/json', body: JSON.stringify({ success: false, error: { code: 'PROVIDER_ERROR', message: 'cardpay refused the refund', request_id: 'r1' } }) });
      }
      if (now === 'lose') {
        next = 'pass';
        await route.fetch();
        return route.abort('connectionreset');
      }
      return route.continue();
    });
    await page.goto(`${t.baseUrl}/dashboard/#/payments/${paymentId}`);
    await page.getByRole('heading', { name: 'Payment 20.00 USD' }).waitFor();
    await page.getByLabel('Refund amount (empty = the rest)').fill('5.00');
    await page.getByRole('button', { name: 'Refund' }).click();
    await shows(page, 'cardpay refused the refund');
    // Refused for good: the same click again is a new request (the old key would replay the refusal).
    await page.getByRole('button', { name: 'Refund' }).click();
    await shows(page, 'No answer came back');
    // Its answer was lost; the merchant now asks for another amount: another request, another key
    // (the lost one's key with another body would be 409 "different request body").
    await page.getByLabel('Refund amount (empty = the rest)').fill('6.00');
    await page.getByRole('button', { name: 'Refund' }).click();
    await shows(page, 'Refund of 6.00 USD is completed.');
    expect(sent.map((r) => JSON.parse(r.body ?? '{}').amount)).toEqual(['5.00', '5.00', '6.00']);
    expect(new Set(sent.map((r) => r.key)).size).toBe(3);
    const refunds = (await t.http.get('/v1/refunds').query({ payment_id: paymentId }).set('X-API-Key', merchant.apiKey).expect(200)).body.data as { amount: string }[];
    expect(refunds.map((r) => r.amount).sort()).toEqual(['5.00', '6.00']);
    await page.close();
  });

  it('captures an approved walletpay payment from its page', async () => {
    await t.http.put('/v1/merchant/credentials').set('X-API-Key', merchant.apiKey)
      .send({ provider: 'walletpay', walletpay: { env: 'sandbox', client_id: 'dashboard-wallet-client', client_secret: 'dashboard-wallet-secret' } }).expect(200);
    const order = await t.http.post('/v1/payments').set('X-API-Key', merchant.apiKey).set('Idempotency-Key', `dash-${randomUUID()}`)
      .send({ provider: 'walletpay', amount: '45.00', currency: 'USD', return_url: 'https://shop.example.com/return', cancel_url: 'https://shop.example.com/cancel' })
      .expect(201);
    const approval: string = order.body.data.next_action.url;
    await fetch(`${approval}${approval.includes('?') ? '&' : '?'}auto=approve`, { redirect: 'manual' });

    const page = await newPage(1280);
    await signIn(page);
    await page.goto(`${t.baseUrl}/dashboard/#/payments/${order.body.data.id}`);
    await page.getByRole('heading', { name: 'Payment 45.00 USD' }).waitFor();
    const capture = page.waitForRequest((req) => req.method() === 'POST' && req.url().endsWith('/capture'));
    await page.getByRole('button', { name: 'Capture' }).click();
    // Like a refund, a capture carries an Idempotency-Key, the same on every click until one succeeds.
    expect((await capture).headers()['idempotency-key']).toMatch(/^[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$/);
    await shows(page, 'Payment captured.');
    await page.locator('dl.summary', { hasText: 'completed' }).waitFor();
    await page.getByLabel('Refund amount (empty = the rest)').waitFor(); // a completed payment offers a refund instead
    expect((await t.http.get(`/v1/payments/${order.body.data.id}`).set('X-API-Key', merchant.apiKey)).body.data.status).toBe('completed');
    await page.close();
  });

  /** A walletpay order of 45.00 USD, approved by the buyer with `auto` unless null. */
  const walletpayOrder = async (auto: 'approve-pending' | 'approve-refused' | null) => {
    // The same credentials as the test above stores (each test may run alone).
    await t.http.put('/v1/merchant/credentials').set('X-API-Key', merchant.apiKey)
      .send({ provider: 'walletpay', walletpay: { env: 'sandbox', client_id: 'dashboard-wallet-client', client_secret: 'dashboard-wallet-secret' } }).expect(200);
    const order = await t.http.post('/v1/payments').set('X-API-Key', merchant.apiKey).set('Idempotency-Key', `dash-${randomUUID()}`)
      .send({ provider: 'walletpay', amount: '45.00', currency: 'USD', return_url: 'https://shop.example.com/return', cancel_url: 'https://shop.example.com/cancel' })
      .expect(201);
    const approval: string = order.body.data.next_action.url;
    if (auto) await fetch(`${approval}${approval.includes('?') ? '&' : '?'}auto=${auto}`, { redirect: 'manual' });
    return order.body.data.id as string;
  };

  it('a failed capture stays shown after the page is redrawn: an unknown outcome says trying again is safe (the same key), the buyer not approved says so', async () => {
    const paymentId = await walletpayOrder(null);
    const page = await newPage(1280);
    await signIn(page);
    const sentKeys: (string | undefined)[] = [];
    await page.route((u) => u.pathname === `/v1/payments/${paymentId}/capture`, (route) => {
      sentKeys.push(route.request().headers()['idempotency-key']);
      if (sentKeys.length > 1) return route.continue();
      // What the service answers when the provider may have captured and it could not record the outcome.
      return route.fulfill(outcomeUnknown(502, 'PROVIDER_ERROR', 'walletpay capture failed: no answer in time'));
    });
    await page.goto(`${t.baseUrl}/dashboard/#/payments/${paymentId}`);
    await page.getByRole('heading', { name: 'Payment 45.00 USD' }).waitFor();
    const capture = page.getByRole('button', { name: 'Capture' });
    /** Clicks Capture and waits until the page is redrawn after the answer (a new, enabled Capture button). */
    const captureAndRedraw = async () => {
      const redrawn = page.waitForResponse((res) => new URL(res.url()).pathname === '/v1/webhooks/logs');
      await capture.click();
      await redrawn;
      await waitFor(async () => capture.isEnabled(), 'the page redrawn');
    };
    await captureAndRedraw();
    const alert = page.getByRole('alert');
    await expect(alert.innerText()).resolves.toMatch(/PROVIDER_ERROR: walletpay capture failed: no answer in time\s+This may have been done already\. Trying again is safe/);

    // Clicked again: the same request (its key); the service answers that the buyer has not approved.
    await captureAndRedraw();
    expect(sentKeys).toHaveLength(2);
    expect(sentKeys[1]).toBe(sentKeys[0]);
    await expect(alert.innerText()).resolves.toMatch(/^CONFLICT: .*approv/);
    await expect(alert.count()).resolves.toBe(1);
    await page.close();
  });

  it('a capture answered 200 says what became of the payment: pending at the provider (held for review), or not captured and why', async () => {
    const page = await newPage(1280);
    await signIn(page);
    for (const [auto, outcome] of [
      ['approve-pending', /^Capture pending at the provider: the payment completes or fails when it settles\.$/],
      ['approve-refused', /^NOT_CAPTURED: Payment not captured: .*TRANSACTION_REFUSED/],
    ] as const) {
      const paymentId = await walletpayOrder(auto);
      await page.goto(`${t.baseUrl}/dashboard/#/payments/${paymentId}`);
      await page.getByRole('heading', { name: 'Payment 45.00 USD' }).waitFor();
      const answer = page.waitForResponse((res) => res.url().endsWith('/capture'));
      await page.getByRole('button', { name: 'Capture' }).click();
      expect((await (await answer).json()).data.status).toBe(auto === 'approve-pending' ? 'pending' : 'failed');
      const said = auto === 'approve-pending' ? page.locator('#status') : page.getByRole('alert');
      await waitFor(async () => outcome.test(await said.innerText()), `the outcome of ${auto}`);
      await expect(page.getByText('Payment captured.').count()).resolves.toBe(0);
    }
    await page.close();
  });

  it('resends a dead delivery from the log, recovers a window, and sends a test event', async () => {
    const page = await newPage(1280);
    await signIn(page);
    await page.getByRole('link', { name: 'Webhook deliveries' }).click();
    await page.getByLabel('Status').selectOption('dead');
    await page.getByRole('button', { name: 'Apply filters' }).click();
    await page.waitForURL(/status=dead/);
    const { id: deadId } = (await deliveryStatus(payments.deadDelivery!, 'payment.completed'))!;
    const resend = page.getByRole('button', { name: `Resend delivery ${deadId}` });
    await resend.click();
    await shows(page, `Delivery ${deadId.slice(0, 8)} resent and delivered.`);
    expect((await deliveryStatus(payments.deadDelivery!, 'payment.completed'))?.status).toBe('delivered');
    expect(receiver.on('/hooks').filter((r) => r.headers['x-webhook-id'] === deadId).at(-1)).toBeDefined();

    await page.getByRole('button', { name: 'Recover failed deliveries' }).click();
    await shows(page, '0 failed deliveries queued again.');

    await page.getByRole('button', { name: 'Send test event' }).click();
    await shows(page, /Test event delivered: HTTP 200 in \d+ ms/);
    await page.getByRole('button', { name: 'Clear' }).click();
    await page.locator('tbody tr', { hasText: 'webhook.test' }).first().waitFor();
    await screenshot(page, 'dashboard-deliveries-1280');
    await page.close();
  });

  it('shows settings: the webhook URL, a rotated secret shown once, and masked credentials', async () => {
    const page = await newPage(1280);
    await signIn(page);
    await page.getByRole('link', { name: 'Settings' }).click();
    await waitFor(async () => (await page.getByLabel('Webhook URL').inputValue()) === receiver.url('/hooks'), 'the webhook URL');
    await page.locator('table', { hasText: 'cardpay' }).waitFor();
    await expect(page.locator('table').innerText()).resolves.toMatch(/cardpay[\s\S]*secret_key: \*\*\*\*0001/);
    page.once('dialog', (dialog) => void dialog.accept());
    await page.getByRole('button', { name: 'Rotate secret' }).click();
    const secret = await page.getByLabel('New signing secret').inputValue();
    expect(secret).toMatch(/^whsec_[A-Za-z0-9]{43}=$/);
    await page.reload();
    await page.getByRole('heading', { name: 'Settings' }).waitFor();
    await expect(page.locator('main').innerText()).resolves.not.toContain(secret);
    await page.close();
  });

  it('Rotate secret keeps the webhook URL the service has: a URL typed in the field but not saved is not saved by it', async () => {
    const page = await newPage(1280);
    await signIn(page);
    await page.getByRole('link', { name: 'Settings' }).click();
    const url = page.getByLabel('Webhook URL');
    await waitFor(async () => (await url.inputValue()) === receiver.url('/hooks'), 'the webhook URL');
    await url.fill('https://typo.example.com/hooks');
    let asked = '';
    page.once('dialog', (dialog) => {
      asked = dialog.message();
      void dialog.accept();
    });
    await page.getByRole('button', { name: 'Rotate secret' }).click();
    await page.getByLabel('New signing secret').waitFor();
    const stored = (await t.http.get('/v1/merchant').set('X-API-Key', merchant.apiKey).expect(200)).body.data;
    expect(stored.webhook_url).toBe(receiver.url('/hooks'));
    // The confirmation said so.
    expect(asked).toContain(`The URL stays ${receiver.url('/hooks')}: your edit is not saved`);
    await page.close();
  });

  it('sends one webhook registration at a time: while one is unanswered, Save and Rotate are disabled and Enter sends no second', async () => {
    const page = await newPage(1280);
    await signIn(page);
    const sent: string[] = [];
    let answer!: () => void;
    const held = new Promise<void>((resolve) => (answer = resolve));
    await page.route((u) => u.pathname === '/v1/merchant/webhook', async (route) => {
      if (route.request().method() !== 'PUT') return route.continue();
      sent.push(route.request().postData() ?? '');
      await held;
      return route.continue();
    });
    await page.getByRole('link', { name: 'Settings' }).click();
    const url = page.getByLabel('Webhook URL');
    await waitFor(async () => (await url.inputValue()) === receiver.url('/hooks'), 'the webhook URL');
    const save = page.getByRole('button', { name: 'Save URL and issue a secret' });
    const rotate = page.getByRole('button', { name: 'Rotate secret' });
    await save.click();
    await waitFor(async () => sent.length === 1, 'the first registration sent');
    await expect(save.isDisabled()).resolves.toBe(true);
    await expect(rotate.isDisabled()).resolves.toBe(true);
    // A second submission by keyboard, and a click on Rotate, while the first is unanswered: nothing sent.
    page.on('dialog', (dialog) => void dialog.accept());
    await url.press('Enter');
    await rotate.click({ force: true });
    await new Promise((resolve) => setTimeout(resolve, 300));
    expect(sent).toHaveLength(1);
    answer();
    const secret = await page.getByLabel('New signing secret').inputValue();
    await waitFor(async () => !(await save.isDisabled()) && !(await rotate.isDisabled()), 'the buttons enabled again');
    expect(sent).toHaveLength(1);
    // The secret shown is the one deliveries are signed with.
    await expect(t.inContext(() => t.service.container.services.merchants.webhookSecret(merchant.merchantId))).resolves.toBe(secret);
    await page.close();
  });

  it("shows every refund, event and delivery of a payment with 101 partial refunds: the first 100, then 'Show 1 more'", async () => {
    // A merchant of its own: the other tests count this merchant's payments and refunds.
    const shop = await t.createMerchant('Dashboard Many Refunds');
    await t.http.put('/v1/merchant/credentials').set('X-API-Key', shop.apiKey).send({ provider: 'cardpay', cardpay: { secret_key: 'sk_test_dashboard_many_0001' } }).expect(200);
    await t.http.put('/v1/merchant/webhook').set('X-API-Key', shop.apiKey).send({ webhook_url: receiver.url('/hooks') }).expect(200);
    const created = await t.http.post('/v1/payments').set('X-API-Key', shop.apiKey).set('Idempotency-Key', `dash-${randomUUID()}`)
      .send({ provider: 'cardpay', amount: '5.00', currency: 'USD', payment_method: 'pm_card_visa' });
    expect(created.status).toBe(201);
    const paymentId = created.body.data.id as string;
    // One refund of 0.01 through the API (its payment.refunded event delivered), then 100 more like it written
    // directly (101 refunds through the provider take minutes on a loaded machine): 101 refunds, and
    // payment.completed with 101 payment.refunded, 102 events and deliveries.
    const first = await t.http.post('/v1/refunds').set('X-API-Key', shop.apiKey).send({ payment_id: paymentId, amount: '0.01' });
    expect([first.status, first.body.data?.status]).toEqual([201, 'completed']);
    let refunded: { id: string; url: string } | undefined;
    await waitFor(async () => {
      [refunded] = await t.sql<{ id: string; url: string }>(`SELECT event_id AS id, url FROM webhook_deliveries WHERE payment_id = $1 AND event_type = 'payment.refunded' AND status = 'delivered'`, [paymentId]);
      return refunded !== undefined;
    }, 'the refund event delivered');
    const eventIds = Array.from({ length: 100 }, () => randomUUID());
    await t.sql(
      `INSERT INTO refunds (id, payment_id, merchant_id, status, amount_minor, currency, provider_ref, created_at, updated_at)
       SELECT gen_random_uuid(), r.payment_id, r.merchant_id, 'completed', 1, r.currency, 're_many_' || i, r.created_at + i * interval '1 ms', r.updated_at
         FROM refunds r, generate_series(1, 100) i WHERE r.id = $1`,
      [first.body.data.id],
    );
    await t.sql('UPDATE payments SET amount_refunded_minor = 101 WHERE id = $1', [paymentId]);
    await t.sql(
      `INSERT INTO events (id, merchant_id, payment_id, type, payload, body, created_at)
       SELECT n.id, e.merchant_id, e.payment_id, e.type, jsonb_set(e.payload, '{id}', to_jsonb(n.id::text), false),
              jsonb_set(e.body::jsonb, '{id}', to_jsonb(n.id::text))::text, e.created_at + n.i * interval '1 ms'
         FROM events e, unnest($2::uuid[]) WITH ORDINALITY AS n(id, i) WHERE e.id = $1`,
      [refunded!.id, eventIds],
    );
    await t.sql(
      `INSERT INTO webhook_deliveries (id, event_id, merchant_id, payment_id, event_type, url, status, attempts, last_response_status, delivered_at, created_at)
       SELECT gen_random_uuid(), n.id, d.merchant_id, d.payment_id, d.event_type, d.url, 'delivered', 1, 200, d.delivered_at, d.created_at + n.i * interval '1 ms'
         FROM webhook_deliveries d, unnest($2::uuid[]) WITH ORDINALITY AS n(id, i) WHERE d.event_id = $1`,
      [refunded!.id, eventIds],
    );
    await waitFor(async () => (await t.sql('SELECT 1 FROM webhook_deliveries WHERE payment_id = $1', [paymentId])).length === 102, '102 deliveries');

    const page = await newPage(1280);
    await page.goto(`${t.baseUrl}/dashboard`);
    await page.getByLabel('API key').fill(shop.apiKey);
    await page.getByRole('button', { name: 'Sign in' }).click();
    await page.getByRole('heading', { name: 'Payments', level: 1 }).waitFor();
    await page.goto(`${t.baseUrl}/dashboard/#/payments/${paymentId}`);
    await page.getByRole('heading', { name: 'Payment 5.00 USD' }).waitFor();
    await expect(page.locator('dl.summary').innerText()).resolves.toContain('1.01 USD');

    for (const [heading, more, total, name] of [
      ['Refunds', 'Show 1 more refund', 101, 'refunds'],
      ['Events', 'Show 2 more events', 102, 'events'],
      ['Webhook deliveries', 'Show 2 more deliveries', 102, 'deliveries'],
    ] as const) {
      const list = page.locator(`h2:text("${heading}") + div`);
      const rows = list.locator('table tbody tr');
      await expect(rows.count()).resolves.toBe(100);
      await expect(list.getByText(`Showing 100 of ${total} ${name}`).count()).resolves.toBe(1);
      if (heading === 'Refunds') {
        // The first read of page 2 fails (a 503 envelope): the error is shown, the button is usable again,
        // and the next click shows every refund.
        let failed = 0;
        await page.route((u) => u.pathname === '/v1/refunds' && u.searchParams.get('page') === '2', async (route) => {
          if (route.request().method() !== 'GET' || failed++ > 0) return route.continue();
          return route.fulfill({ status: 503, contentType: 'application/json', body: JSON.stringify({ success: false, error: { code: 'SERVICE_UNAVAILABLE', message: 'the database is not answering', request_id: 'r503' } }) });
        });
        await list.getByRole('button', { name: more }).click();
        await list.getByRole('alert').getByText('the database is not answering').waitFor();
        await expect(list.getByRole('button', { name: more }).isEnabled()).resolves.toBe(true);
        await expect(rows.count()).resolves.toBe(100);
      }
      await list.getByRole('button', { name: more }).click();
      // "Showing 100 of N" goes once the next page is drawn; only then is the row count final.
      await list.getByText(/^Showing 100 of/).waitFor({ state: 'detached' });
      await expect(rows.count()).resolves.toBe(total);
      await expect(list.getByRole('button', { name: /^Show \d+ more/ }).count()).resolves.toBe(0);
    }
    // Every refund once, oldest first: 101 distinct ids.
    const refundIds = await page.locator('h2:text("Refunds") + div table tbody tr td:first-child code').evaluateAll((codes) => codes.map((c) => c.getAttribute('title')));
    const stored = await t.sql<{ id: string }>('SELECT id::text FROM refunds WHERE payment_id = $1 ORDER BY created_at, id', [paymentId]);
    expect(new Set(refundIds)).toEqual(new Set(stored.map((r) => r.id)));
    expect(refundIds).toHaveLength(101);
    await page.close();
  }, 90_000);

  describe('on a service of its own that forgets refund keys after 8 s', () => {
    let short: TestService;
    beforeAll(async () => {
      // The lease and provider timeout below the retention, as its config requires.
      short = await startTestService({ IDEMPOTENCY_KEY_RETENTION: '8s', IDEMPOTENCY_LEASE: '3s', PROVIDER_TIMEOUT_MS: '1000', IDEMPOTENCY_KEY_PRUNE_INTERVAL: '1s' });
    }, 60_000);
    afterAll(async () => {
      await short?.stop();
    });

    it('a kept refund key is not sent again once the service may have forgotten it (IDEMPOTENCY_KEY_RETENTION): the page shows the refund and asks before a new one', async () => {
      const { apiKey, paymentId, refunds } = await shortKeyMerchant(short, 'Dashboard Short Keys', 'sk_test_dashboard_short_0001');
      const page = await newPage(1280);
      await signedInAtPayment(page, short.baseUrl, apiKey, paymentId);
      const sentKeys: string[] = [];
      await page.route((u) => u.pathname === '/v1/refunds', (route) => {
        if (route.request().method() === 'POST') sentKeys.push(route.request().headers()['idempotency-key']!);
        return route.continue();
      });
      await short.http.post('/sandbox/cardpay/_control/outage').send({ mode: 'error' }).expect(200);
      await refundUnanswered(page, page.locator('h2:text("Refunds") + div table tbody tr'));
      // The service forgets the key: from now on the same key would be a new request.
      await keyPruned(short, sentKeys[0]!);

      // The same click: no request without asking; declined, nothing is sent and the kept refund is shown.
      let asked = '';
      page.once('dialog', (dialog) => {
        asked = dialog.message();
        void dialog.dismiss();
      });
      await page.getByLabel('Refund amount (empty = the rest)').fill('5.00');
      await page.getByRole('button', { name: 'Refund' }).click();
      await shows(page, /^No refund sent\. The refund of 5\.00 USD sent at .+ is pending: it may still be made\./);
      expect(asked).toMatch(/is pending: it may still be made\. It was sent too long ago .* remembers one for 8 seconds.*Make a new refund of 5\.00 USD\?/);
      expect(sentKeys).toHaveLength(1);
      expect((await refunds()).map((r) => r.amount)).toEqual(['5.00']);

      // Accepted: a new refund, under a new key, as the merchant now means.
      await short.http.post('/sandbox/cardpay/_control/outage').send({ mode: 'ok' }).expect(200);
      page.once('dialog', (dialog) => void dialog.accept());
      await page.getByRole('button', { name: 'Refund' }).click();
      await shows(page, 'Refund of 5.00 USD is completed.');
      expect(sentKeys).toHaveLength(2);
      expect(sentKeys[1]).not.toBe(sentKeys[0]);
      expect((await refunds()).map((r) => r.amount)).toEqual(['5.00', '5.00']);
      await page.close();
    }, 90_000);

    it('while /dashboard/config.json cannot be read, a kept refund key is not sent again on an assumed 24 h: the page asks before a new refund, and declined sends nothing', async () => {
      // The service forgets refund keys after 8 s; the page cannot learn it (config.json answered 503: a blip,
      // a proxy that passes only /v1), so it must not assume the documented 24 h.
      const { apiKey, paymentId, refunds } = await shortKeyMerchant(short, 'Dashboard Unknown Key Lifetime', 'sk_test_dashboard_short_0002');
      const page = await newPage(1280);
      let configReads = 0;
      await page.route((u) => u.pathname === '/dashboard/config.json', (route) => {
        configReads += 1;
        return route.fulfill({ status: 503, contentType: 'text/html', body: '<h1>503 Service Unavailable</h1>' });
      });
      const sentKeys: string[] = [];
      let loseNextAnswer = true;
      await page.route((u) => u.pathname === '/v1/refunds', async (route) => {
        if (route.request().method() !== 'POST') return route.continue();
        sentKeys.push(route.request().headers()['idempotency-key']!);
        if (!loseNextAnswer) return route.continue();
        // The refund is made; its answer never reaches the page, which keeps the key.
        loseNextAnswer = false;
        await route.fetch();
        return route.abort('connectionreset');
      });
      await signedInAtPayment(page, short.baseUrl, apiKey, paymentId);
      await page.getByLabel('Refund amount (empty = the rest)').fill('5.00');
      await page.getByRole('button', { name: 'Refund' }).click();
      await page.getByRole('alert').waitFor();
      expect((await refunds()).map((r) => r.amount)).toEqual(['5.00']);
      // The service forgets the key: the same key sent now would be a new request, a second refund.
      await keyPruned(short, sentKeys[0]!);

      let asked = '';
      page.once('dialog', (dialog) => {
        asked = dialog.message();
        void dialog.dismiss();
      });
      await page.getByRole('button', { name: 'Refund' }).click();
      await shows(page, /^No refund sent\. A refund of 5\.00 USD was sent at .+ and its answer was lost: it may have been made\./);
      expect(asked).toMatch(/could not be read .*it may have forgotten this one.*Make a new refund of 5\.00 USD\?/);
      expect(configReads).toBeGreaterThan(0);
      expect(sentKeys).toHaveLength(1);
      expect((await refunds()).map((r) => r.amount)).toEqual(['5.00']);
      await page.close();
    }, 90_000);
  });

  it('is readable and usable at 390 px wide, by keyboard', async () => {
    const page = await newPage(390);
    await signIn(page);
    await page.locator('tbody tr').first().waitFor();
    await screenshot(page, 'dashboard-payments-390', { fullPage: false });
    const overflow = await page.evaluate(() => document.documentElement.scrollWidth - window.innerWidth);
    expect(overflow).toBeLessThanOrEqual(0);
    // After each navigation focus is on the page's content: Tab reaches its first control, and going
    // back (Shift+Tab) passes Sign out, then the navigation links.
    const active = () => page.evaluate(() => document.activeElement?.getAttribute('name') ?? document.activeElement?.textContent?.trim() ?? '');
    await page.keyboard.press('Tab');
    await expect(active()).resolves.toBe('status');
    const backwards: string[] = [];
    for (let i = 0; i < 3; i++) {
      await page.keyboard.press('Shift+Tab');
      backwards.push(await active());
    }
    expect(backwards).toEqual(['Sign out', 'Settings', 'Webhook deliveries']);
    await page.keyboard.press('Tab');
    await expect(active()).resolves.toBe('Settings');
    await page.keyboard.press('Enter');
    await page.getByRole('heading', { name: 'Settings' }).waitFor();
    await page.goto(`${t.baseUrl}/dashboard/#/payments/${payments.large}`);
    await page.getByRole('heading', { name: 'Payment 149.99 USD' }).waitFor();
    expect(await page.evaluate(() => document.documentElement.scrollWidth - window.innerWidth)).toBeLessThanOrEqual(0);
    await screenshot(page, 'dashboard-payment-390', { fullPage: false });
    for (const [hash, heading] of [['deliveries', 'Webhook deliveries'], ['settings', 'Settings']] as const) {
      await page.goto(`${t.baseUrl}/dashboard/#/${hash}`);
      await page.getByRole('heading', { name: heading, level: 1 }).waitFor();
      await page.locator('table').first().waitFor();
      const overflow = await page.evaluate(() => document.documentElement.scrollWidth - window.innerWidth);
      expect({ page: hash, overflow }).toEqual({ page: hash, overflow: 0 });
      await screenshot(page, `dashboard-${hash}-390`, { fullPage: false });
    }
    await page.close();
  });
});
