import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import type { Browser, BrowserContext, Page } from 'playwright-core';
import { startTestService, type TestService } from '../support/service.js';
import { eventually } from '../support/webhook-receiver.js';
import { launchChromium, screenshot } from './chromium.js';
import { MerchantSite } from './merchant-site.js';

/**
 * A real browser (a system Chromium, or the one the @sparticuz/chromium package ships, driven by playwright-core) against the real service: the API
 * reference renders, and a buyer clicks through the walletpay approval page and the cardpay 3-D
 * Secure page; the payment's status is then checked through the API.
 */

let t: TestService;
let browser: Browser;
let context: BrowserContext;
let shop: MerchantSite;
let walletKey: string;
let cardKey: string;
let n = 0;

const idem = () => `browser-${Date.now()}-${++n}`;
const getPayment = async (id: string, key: string) => (await t.http.get(`/v1/payments/${id}`).set('X-API-Key', key)).body.data;
const statusBecomes = (id: string, key: string, status: string) =>
  eventually(async () => (await getPayment(id, key)).status === status, 15_000, `payment ${id} → ${status}`);

async function newPage(): Promise<Page> {
  const page = await context.newPage();
  page.setDefaultTimeout(15_000);
  return page;
}

beforeAll(async () => {
  // Launched first: a broken Chromium fails the file at once.
  browser = await launchChromium();
  context = await browser.newContext({ viewport: { width: 1100, height: 800 } });
  shop = await new MerchantSite().start();
  // A quick status sync, so a cancelled walletpay order is noticed without waiting minutes.
  t = await startTestService({ STATUS_SYNC_SCHEDULE: '300ms,300ms,300ms,300ms', STATUS_SYNC_POLL_INTERVAL: '200ms' });

  ({ apiKey: walletKey } = await t.createMerchant('Browser Wallet Shop'));
  await t.http.put('/v1/merchant/credentials').set('X-API-Key', walletKey)
    .send({ provider: 'walletpay', walletpay: { env: 'sandbox', client_id: 'browser-wallet-client', client_secret: 'browser-wallet-secret' } })
    .expect(200);

  ({ apiKey: cardKey } = await t.createMerchant('Browser Card Shop'));
  // The service registers its own callback endpoint with the simulator.
  await t.http.put('/v1/merchant/credentials').set('X-API-Key', cardKey)
    .send({ provider: 'cardpay', cardpay: { secret_key: 'sk_test_browser_0001' } })
    .expect(200);
}, 60_000);

afterAll(async () => {
  await context?.close();
  await browser?.close();
  await shop?.stop();
  await t?.stop();
});

describe('/docs in a browser', () => {
  it('renders the API reference with the payments operations, and nothing fails to load', async () => {
    const page = await newPage();
    const failed: string[] = [];
    page.on('requestfailed', (req) => failed.push(`${req.url()} (${req.failure()?.errorText ?? 'failed'})`));
    page.on('response', (res) => {
      if (res.status() >= 400) failed.push(`${res.url()} (${res.status()})`);
    });
    const pageErrors: string[] = [];
    page.on('pageerror', (err) => pageErrors.push(err.message));
    // The page's Content-Security-Policy: whatever it blocked is reported as a console error ("Refused to …").
    const consoleErrors: string[] = [];
    page.on('console', (message) => {
      if (message.type() === 'error') consoleErrors.push(message.text());
    });

    await page.goto(`${t.baseUrl}/docs/`);
    await page.locator('.opblock').first().waitFor();

    await expect(page.title()).resolves.toBe('Payments API reference');
    await expect(page.locator('.opblock-tag[data-tag="Payments"]').isVisible()).resolves.toBe(true);
    const createPayment = page.locator('.opblock-post', { has: page.locator('.opblock-summary-path[data-path="/v1/payments"]') });
    await expect(createPayment.isVisible()).resolves.toBe(true);
    await expect(createPayment.locator('.opblock-summary-description').innerText()).resolves.toBe('Create a payment');
    for (const path of ['/v1/payments/{id}', '/v1/payments/{id}/capture', '/v1/refunds']) {
      await expect(page.locator(`.opblock-summary-path[data-path="${path}"]`).first().isVisible()).resolves.toBe(true);
    }
    await expect(page.getByText('Get a payment', { exact: true }).isVisible()).resolves.toBe(true);
    await screenshot(page, 'docs', { fullPage: false });

    // Opening an operation shows its request body schema.
    await createPayment.locator('.opblock-summary').click();
    await createPayment.locator('.opblock-body').waitFor();
    await expect(createPayment.getByText('Idempotency-Key', { exact: false }).first().isVisible()).resolves.toBe(true);

    await expect(page.getByText('Failed to load API definition').count()).resolves.toBe(0);
    await expect(page.locator('.errors-wrapper').count()).resolves.toBe(0);
    expect(failed).toEqual([]);
    expect(pageErrors).toEqual([]);
    expect(consoleErrors).toEqual([]);
    await screenshot(page, 'docs-create-payment');
    await page.close();
  });
});

describe('walletpay approval page in a browser', () => {
  const createWalletPayment = async (amount: string) => {
    const res = await t.http.post('/v1/payments').set('X-API-Key', walletKey).set('Idempotency-Key', idem()).send({
      provider: 'walletpay', amount, currency: 'USD',
      return_url: shop.url('/wallet/return'), cancel_url: shop.url('/wallet/cancel'),
    });
    expect(res.status).toBe(201);
    const p = res.body.data;
    expect(p).toMatchObject({ status: 'pending', next_action: { type: 'redirect', url: expect.any(String) } });
    return p as { id: string; provider_ref: string; next_action: { url: string } };
  };

  it('Approve lands on the return URL with the order token, and the capture then completes the payment', async () => {
    const p = await createWalletPayment('45.00');
    const page = await newPage();
    await page.goto(p.next_action.url);
    await expect(page.getByRole('heading', { name: 'Review your payment' }).isVisible()).resolves.toBe(true);
    await expect(page.getByText('45.00 USD').isVisible()).resolves.toBe(true);
    await screenshot(page, 'walletpay-approval');

    await page.getByRole('button', { name: 'Approve', exact: true }).click();
    await page.waitForURL((url) => url.origin === shop.origin && url.pathname === '/wallet/return');
    const landed = new URL(page.url());
    expect(landed.searchParams.get('token')).toBe(p.provider_ref);
    expect(landed.searchParams.get('PayerID')).toEqual(expect.any(String));
    await expect(page.getByRole('heading', { name: 'Thanks' }).isVisible()).resolves.toBe(true);
    await screenshot(page, 'walletpay-returned');
    await page.close();

    const captured = await t.http.post(`/v1/payments/${p.id}/capture`).set('X-API-Key', walletKey).send({});
    expect(captured.status).toBe(200);
    expect(captured.body.data).toMatchObject({ id: p.id, status: 'completed', provider_ref: p.provider_ref, amount: '45.00' });
    expect((await getPayment(p.id, walletKey)).status).toBe('completed');
  });

  it('Cancel lands on the cancel URL and the payment stays pending; back at the same link the buyer approves and the capture completes', async () => {
    const p = await createWalletPayment('12.50');
    const page = await newPage();
    await page.goto(p.next_action.url);
    await page.getByRole('button', { name: 'Cancel and return to merchant' }).click();
    await page.waitForURL((url) => url.origin === shop.origin && url.pathname === '/wallet/cancel');
    expect(new URL(page.url()).searchParams.get('token')).toBe(p.provider_ref);

    // As PayPal: the order still awaits the buyer, so nothing fails it.
    const early = await t.http.post(`/v1/payments/${p.id}/capture`).set('X-API-Key', walletKey).send({});
    expect(early.status).toBe(409);
    expect(await getPayment(p.id, walletKey)).toMatchObject({ status: 'pending', next_action: { url: p.next_action.url } });

    await page.goto(p.next_action.url);
    await page.getByRole('button', { name: 'Approve', exact: true }).click();
    await page.waitForURL((url) => url.origin === shop.origin && url.pathname === '/wallet/return');
    await page.close();
    const captured = await t.http.post(`/v1/payments/${p.id}/capture`).set('X-API-Key', walletKey).send({});
    expect(captured.status).toBe(200);
    expect(captured.body.data.status).toBe('completed');
  });
});

describe('cardpay 3-D Secure page in a browser', () => {
  const createThreeDsPayment = async () => {
    const res = await t.http.post('/v1/payments').set('X-API-Key', cardKey).set('Idempotency-Key', idem()).send({
      provider: 'cardpay', amount: '25.00', currency: 'USD', payment_method: 'pm_card_threeDSecureRequired',
      return_url: shop.url('/card/return'),
    });
    expect(res.status).toBe(201);
    const p = res.body.data;
    expect(p).toMatchObject({ status: 'pending', next_action: { type: 'redirect', url: expect.any(String) } });
    return p as { id: string; provider_ref: string; next_action: { url: string } };
  };

  it('Complete lands on the return URL, and the signed event completes the payment', async () => {
    const p = await createThreeDsPayment();
    const page = await newPage();
    await page.goto(p.next_action.url);
    await expect(page.getByRole('heading', { name: 'Authenticate this payment' }).isVisible()).resolves.toBe(true);
    await expect(page.getByText('25.00 USD').isVisible()).resolves.toBe(true);
    await screenshot(page, 'cardpay-3ds');

    await page.getByRole('button', { name: 'Complete' }).click();
    await page.waitForURL((url) => url.origin === shop.origin && url.pathname === '/card/return');
    const landed = new URL(page.url());
    expect(landed.searchParams.get('payment_intent')).toBe(p.provider_ref);
    expect(landed.searchParams.get('redirect_status')).toBe('succeeded');
    await page.close();

    await statusBecomes(p.id, cardKey, 'completed');
  });

  it('Fail lands on the return URL marked failed, and the payment fails', async () => {
    const p = await createThreeDsPayment();
    const page = await newPage();
    await page.goto(p.next_action.url);
    await page.getByRole('button', { name: 'Fail' }).click();
    await page.waitForURL((url) => url.origin === shop.origin && url.pathname === '/card/return');
    expect(new URL(page.url()).searchParams.get('redirect_status')).toBe('failed');
    await page.close();

    await statusBecomes(p.id, cardKey, 'failed');
    // The provider's text for a failed 3-D Secure authentication, as the merchant reads it.
    expect((await getPayment(p.id, cardKey)).failure_reason).toBe(
      'The provided PaymentMethod has failed authentication. You can provide payment_method_data or a new PaymentMethod to attempt to fulfill this PaymentIntent again.',
    );
  });
});
