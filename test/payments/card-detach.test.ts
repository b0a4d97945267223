import { readFileSync } from 'node:fs';
import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import { DETACH_CARDS_JOB } from '../../server/jobs/detach-cards.job.js';
import { jobRunFinished, runJobOnce } from '../support/job-run.js';
import { scrapeMetrics, total } from '../support/prometheus.js';
import { inProcessLogFile } from '../support/secret-audit.js';
import { startTestService, type TestService } from '../support/service.js';
import { eventually } from '../support/webhook-receiver.js';

/**
 * DELETE /v1/payments/cards/{id} deactivates the card at once and detaches its payment method from its
 * customer at cardpay. A detach that cannot be done then (cardpay down, no credentials, credentials of
 * another account) is kept due (saved_cards.detach_due_at, set with the deactivation) and retried by the
 * worker's job (cards.detach-due) until the simulator confirms it. Before, it was only logged: the
 * payment method stayed attached for ever, and a second DELETE was 404.
 */
let t: TestService;
let n = 0;

beforeAll(async () => {
  // An hour between the job's runs (it runs once at boot): every detach retry below is a run the test asks for.
  t = await startTestService({ STATUS_SYNC_POLL_INTERVAL: '1h' }, { agendaLockLifetimeMs: 60_000 });
  await jobRunFinished(t, DETACH_CARDS_JOB);
});
afterAll(async () => t.stop());

const outage = (mode: 'ok' | 'error') => t.http.post('/sandbox/cardpay/_control/outage').send({ mode }).expect(200);
const storeKey = (apiKey: string, secretKey: string) =>
  t.http.put('/v1/merchant/credentials').set('X-API-Key', apiKey).send({ provider: 'cardpay', cardpay: { secret_key: secretKey } }).expect(200);

async function shop(name: string, secretKey: string) {
  const { apiKey } = await t.createMerchant(name);
  await storeKey(apiKey, secretKey);
  const save = async (pm = 'pm_card_visa') => (await t.http.post('/v1/payments/cards').set('X-API-Key', apiKey).send({ payment_method_id: pm }).expect(201)).body.data as { id: string };
  const remove = (id: string) => t.http.delete(`/v1/payments/cards/${id}`).set('X-API-Key', apiKey);
  const listed = async () => ((await t.http.get('/v1/payments/cards').set('X-API-Key', apiKey).expect(200)).body.data as { id: string }[]).map((c) => c.id);
  const charge = (cardId: string) => t.http.post('/v1/payments').set('X-API-Key', apiKey).set('Idempotency-Key', `detach-${Date.now()}-${++n}`)
    .send({ provider: 'cardpay', amount: '5.00', currency: 'USD', saved_card_id: cardId });
  return { apiKey, save, remove, listed, charge };
}

/** The card's payment method at the simulator: attached to a customer, or detached. */
async function atSimulator(cardId: string): Promise<{ attached: boolean; detached: boolean }> {
  const [row] = await t.sql<{ attached: boolean; detached: boolean }>(
    `SELECT pm.customer IS NOT NULL AS attached, pm.detached FROM saved_cards c JOIN sandbox_cardpay_payment_methods pm ON pm.id = c.payment_method_token WHERE c.id = $1`, [cardId]);
  return row!;
}
const detachDue = async (cardId: string) => (await t.sql<{ due: boolean }>('SELECT detach_due_at IS NOT NULL AS due FROM saved_cards WHERE id = $1', [cardId]))[0]!.due;
/** Due now, not when its claim or back-off runs out (minutes to hours). */
const dueNow = (cardId: string) => t.sql('UPDATE saved_cards SET detach_due_at = now() WHERE id = $1', [cardId]);
const logOf = (cardId: string) => readFileSync(inProcessLogFile(t.databaseUrl), 'utf8').split('\n').filter((l) => l.includes(cardId)).join('\n');
const gauge = async () => total(await scrapeMetrics(t), 'saved_cards_detach_due', { provider: 'cardpay' });
/** The gauge once it reads `n` (a scrape serves a snapshot of the database up to 5 s old). */
const gaugeReads = (n: number) => eventually(async () => (await gauge()) === n, 10_000, `saved_cards_detach_due ${n}`);

describe('deleting a saved card', () => {
  it('detaches its payment method at cardpay at once when cardpay answers; nothing is left due', async () => {
    const s = await shop('Detach Now Shop', 'sk_test_card_detach_now');
    const card = await s.save();
    expect(await atSimulator(card.id)).toEqual({ attached: true, detached: false });
    expect((await s.remove(card.id)).body).toEqual({ success: true, data: { id: card.id, deleted: true } });
    expect(await atSimulator(card.id)).toEqual({ attached: false, detached: true });
    expect(await detachDue(card.id)).toBe(false);
  });

  it('while cardpay is down: 200 and the card is gone here at once; the detach stays due, a run during the outage keeps it so, and the run after it detaches it', async () => {
    const s = await shop('Detach Outage Shop', 'sk_test_card_detach_outage');
    const card = await s.save();
    const kept = await s.save('pm_card_mastercard');
    const before = (await t.sql<{ n: number }>('SELECT count(*)::int AS n FROM saved_cards WHERE detach_due_at IS NOT NULL'))[0]!.n;
    await outage('error');
    try {
      const deleted = await s.remove(card.id);
      expect(deleted.status).toBe(200);
      expect(deleted.body).toEqual({ success: true, data: { id: card.id, deleted: true } });
      expect(await s.listed()).toEqual([kept.id]);
      // Still attached at cardpay, and due for the worker (before: only logged, never tried again).
      expect(await atSimulator(card.id)).toEqual({ attached: true, detached: false });
      expect(await detachDue(card.id)).toBe(true);
      expect(logOf(card.id)).toContain('could not be detached at the provider: retried by the worker');
      await gaugeReads(before + 1);
      expect((await s.remove(card.id)).status).toBe(404);

      // A run while cardpay is still down: the job does not fail, the detach stays due, later — the wait growing
      // with the time since the deletion (here an hour ago: about an hour more, not the claim's 5 minutes).
      await t.sql("UPDATE saved_cards SET deleted_at = now() - interval '1 hour' WHERE id = $1", [card.id]);
      await dueNow(card.id);
      expect(await runJobOnce(t, DETACH_CARDS_JOB)).toBe(1);
      expect(await detachDue(card.id)).toBe(true);
      const [{ minutes }] = await t.sql<{ minutes: number }>('SELECT extract(epoch FROM detach_due_at - now())::float / 60 AS minutes FROM saved_cards WHERE id = $1', [card.id]) as [{ minutes: number }];
      expect(minutes).toBeGreaterThan(50);
      expect(minutes).toBeLessThan(70);
      expect(await atSimulator(card.id)).toEqual({ attached: true, detached: false });
      expect(logOf(card.id)).toContain('retrying later');
    } finally {
      await outage('ok');
    }
    // Never charged after the 200, whatever cardpay says.
    const refused = await s.charge(card.id);
    expect(refused.status).toBe(422);
    expect(refused.body.error.details[0].field).toBe('saved_card_id');

    // cardpay answers again: the next run detaches it and clears the mark.
    await dueNow(card.id);
    expect(await runJobOnce(t, DETACH_CARDS_JOB)).toBe(1);
    expect(await atSimulator(card.id)).toEqual({ attached: false, detached: true });
    expect(await detachDue(card.id)).toBe(false);
    await gaugeReads(before);
    expect(logOf(card.id)).toContain('detached at the provider on a retry');
    // The other card was left alone.
    expect(await atSimulator(kept.id)).toEqual({ attached: true, detached: false });
  });

  it('without credentials, then with credentials of another account: stays due, nothing asked; detached once the card account\'s credentials are stored again', async () => {
    const s = await shop('Detach Credentials Shop', 'sk_test_card_detach_creds_a');
    const card = await s.save();
    await t.http.delete('/v1/merchant/credentials/cardpay').set('X-API-Key', s.apiKey).expect(200);
    expect((await s.remove(card.id)).status).toBe(200);
    expect(await s.listed()).toEqual([]);
    expect(await detachDue(card.id)).toBe(true);
    expect(logOf(card.id)).toContain('no cardpay credentials any more');

    // Another account's key: the payment method is not that account's, so it is not sent there (its
    // "no such payment method" would otherwise count as done).
    await storeKey(s.apiKey, 'sk_test_card_detach_creds_b');
    expect(await runJobOnce(t, DETACH_CARDS_JOB)).toBe(1); // due at once after the store
    expect(await detachDue(card.id)).toBe(true);
    expect(await atSimulator(card.id)).toEqual({ attached: true, detached: false });
    expect(logOf(card.id)).toContain('stored credentials are of account');

    // The card's own account again: its detach is due at once, and done.
    await storeKey(s.apiKey, 'sk_test_card_detach_creds_a');
    expect(await runJobOnce(t, DETACH_CARDS_JOB)).toBe(1);
    expect(await atSimulator(card.id)).toEqual({ attached: false, detached: true });
    expect(await detachDue(card.id)).toBe(false);
  });

  it('a payment method already detached at cardpay (by hand, in the dashboard), or that cardpay no longer has, counts as detached', async () => {
    const s = await shop('Detach Gone Shop', 'sk_test_card_detach_gone');
    const detachedByHand = await s.save();
    const gone = await s.save('pm_card_mastercard');
    await outage('error');
    try {
      expect((await s.remove(detachedByHand.id)).status).toBe(200);
      expect((await s.remove(gone.id)).status).toBe(200);
    } finally {
      await outage('ok');
    }
    const tokenOf = async (cardId: string) => (await t.sql<{ token: string }>('SELECT payment_method_token AS token FROM saved_cards WHERE id = $1', [cardId]))[0]!.token;
    // 400 "not attached to a customer" at the retry.
    await t.http.post(`/sandbox/cardpay/v1/payment_methods/${await tokenOf(detachedByHand.id)}/detach`).set('Authorization', 'Bearer sk_test_card_detach_gone').expect(200);
    // 404 resource_missing at the retry.
    await t.sql('DELETE FROM sandbox_cardpay_payment_methods WHERE id = $1', [await tokenOf(gone.id)]);
    await dueNow(detachedByHand.id);
    await dueNow(gone.id);
    expect(await runJobOnce(t, DETACH_CARDS_JOB)).toBe(1);
    expect(await detachDue(detachedByHand.id)).toBe(false);
    expect(await detachDue(gone.id)).toBe(false);
    // Done, not given up on as a refused request (an error line asking an operator to detach it by hand).
    for (const card of [detachedByHand, gone]) {
      expect(logOf(card.id)).toContain('detached at the provider on a retry');
      expect(logOf(card.id)).not.toContain('given up');
    }
  });

  it('a detach still not done 30 days after the deletion is given up on, logged at error with the payment method for an operator', async () => {
    const s = await shop('Detach Give Up Shop', 'sk_test_card_detach_give_up');
    const card = await s.save();
    await outage('error');
    try {
      expect((await s.remove(card.id)).status).toBe(200);
      await t.sql(`UPDATE saved_cards SET deleted_at = now() - interval '31 days', detach_due_at = now() WHERE id = $1`, [card.id]);
      expect(await runJobOnce(t, DETACH_CARDS_JOB)).toBe(1);
    } finally {
      await outage('ok');
    }
    expect(await detachDue(card.id)).toBe(false);
    const [{ token }] = await t.sql<{ token: string }>('SELECT payment_method_token AS token FROM saved_cards WHERE id = $1', [card.id]) as [{ token: string }];
    const givenUp = logOf(card.id).split('\n').find((l) => l.includes('given up'));
    expect(givenUp).toBeDefined();
    expect(JSON.parse(givenUp!)).toMatchObject({ level: 50, cardId: card.id, paymentMethod: token });
    expect(await atSimulator(card.id)).toEqual({ attached: true, detached: false });
  });

  it("a 'no such payment method' through credentials not known to be of the card's account (a card saved before its account was recorded) is no proof: given up on, logged at error for an operator, never cleared as detached", async () => {
    const s = await shop('Detach Unknown Account Shop', 'sk_test_card_detach_unknown_a');
    const card = await s.save();
    // Saved before migration 20261129004101 recorded the account.
    await t.sql('UPDATE saved_cards SET provider_account = NULL WHERE id = $1', [card.id]);
    await storeKey(s.apiKey, 'sk_test_card_detach_unknown_b');
    expect((await s.remove(card.id)).status).toBe(200);
    expect(await s.listed()).toEqual([]);

    // Still attached under account A: B's "no such payment method" said nothing about it.
    expect(await atSimulator(card.id)).toEqual({ attached: true, detached: false });
    expect(await detachDue(card.id)).toBe(false);
    const [{ token, customer }] = await t.sql<{ token: string; customer: string }>('SELECT payment_method_token AS token, customer_ref AS customer FROM saved_cards WHERE id = $1', [card.id]) as [{ token: string; customer: string }];
    const lines = logOf(card.id).split('\n').filter(Boolean).map((l) => JSON.parse(l) as Record<string, unknown>);
    expect(lines.some((l) => /detached at the provider/.test(String(l.msg)) && !/given up/.test(String(l.msg)))).toBe(false);
    const givenUp = lines.find((l) => /given up/.test(String(l.msg)));
    expect(givenUp).toMatchObject({ level: 50, cardId: card.id, paymentMethod: token, customerRef: customer, kind: 'unproven' });
    expect(String(givenUp!.msg)).toContain('may still be attached to its customer under another account');
  });
});
