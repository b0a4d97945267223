import { randomUUID } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import { startTestService, type TestService } from '../support/service.js';

/**
 * interface.md: "For a wallet payment, the approval URL is held in the raw provider response and is
 * retrieved later with GET /v1/payments/{id}." After a capture refused INSTRUMENT_DECLINED the buyer must
 * approve again at that link; provider_response must still be the order with its payer-action link (the
 * refusal is the capture's 409), also after a status sync.
 */
let t: TestService;
let key: string;

beforeAll(async () => {
  t = await startTestService({ STATUS_SYNC_SCHEDULE: '1h' });
  ({ apiKey: key } = await t.createMerchant('Declined Funding Shop'));
  await t.http.put('/v1/merchant/credentials').set('X-API-Key', key)
    .send({ provider: 'walletpay', walletpay: { env: 'sandbox', client_id: `declined-${randomUUID()}`, client_secret: 'declined-secret' } }).expect(200);
});
afterAll(async () => {
  await t.stop();
});

const detail = async (id: string) => (await t.http.get(`/v1/payments/${id}`).set('X-API-Key', key).expect(200)).body.data;
const payerAction = (response: { links?: { rel: string; href: string }[] } | null) => response?.links?.find((l) => l.rel === 'payer-action')?.href;

describe('a walletpay capture refused INSTRUMENT_DECLINED', () => {
  it('leaves provider_response the order with its payer-action link (the approval URL), through a status sync too', async () => {
    const created = await t.http.post('/v1/payments').set('X-API-Key', key).set('Idempotency-Key', randomUUID())
      .send({ provider: 'walletpay', amount: '45.00', currency: 'USD', return_url: 'https://shop.example.com/return', cancel_url: 'https://shop.example.com/cancel' });
    expect(created.status).toBe(201);
    const p = created.body.data as { id: string; provider_ref: string; next_action: { url: string } };
    await fetch(`${p.next_action.url}&auto=approve-instrument-declined`, { redirect: 'manual' });

    const refused = await t.http.post(`/v1/payments/${p.id}/capture`).set('X-API-Key', key).send({});
    expect(refused.status).toBe(409);
    expect(refused.body.error.message).toContain('INSTRUMENT_DECLINED');

    const after = await detail(p.id);
    expect(after).toMatchObject({ status: 'pending', next_action: { type: 'redirect', url: p.next_action.url } });
    expect(after.provider_response).toMatchObject({ id: p.provider_ref, status: 'PAYER_ACTION_REQUIRED' });
    expect(payerAction(after.provider_response)).toBe(p.next_action.url);

    await t.inContext(() => t.service.container.services.statusSync.syncOne(p.id));
    const synced = await detail(p.id);
    expect(synced).toMatchObject({ status: 'pending', next_action: { type: 'redirect', url: p.next_action.url } });
    expect(payerAction(synced.provider_response)).toBe(p.next_action.url);

    // The buyer approves again at that link; the capture completes.
    await fetch(`${payerAction(synced.provider_response)}&auto=approve`, { redirect: 'manual' });
    const done = await t.http.post(`/v1/payments/${p.id}/capture`).set('X-API-Key', key).send({});
    expect(done.status).toBe(200);
    expect(done.body.data.status).toBe('completed');
  });
});
