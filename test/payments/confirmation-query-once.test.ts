import { randomUUID } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import type { EntityManager } from '@mikro-orm/postgresql';
import { askForConfirmation } from '../../server/domain/inbound/confirmation-queries.js';
import { startTestService, type TestService } from '../support/service.js';

/**
 * Unverifiable notifications about one transaction arriving at once (a burst of forged or unsigned reversal
 * results, across api processes): each is confirmed by asking the operator (a Transaction Status query,
 * against the merchant's quota), and only one may be asked while it is open — not one per notification.
 */
let t: TestService;
let merchantId: string;

beforeAll(async () => {
  t = await startTestService();
  ({ merchantId } = await t.createMerchant('Confirmation Burst Shop'));
});
afterAll(async () => {
  await t?.stop();
});

describe('confirmation queries about one transaction, asked concurrently', () => {
  it('send one query to the provider while it is open', async () => {
    const em = t.service.container.orm.em as unknown as EntityManager;
    const code = `RCPT${randomUUID().slice(0, 8).toUpperCase()}`;
    let sent = 0;
    const ask = () =>
      t.inContext(() =>
        askForConfirmation(em, { id: randomUUID(), provider: 'mobilemoney', merchantId, paymentId: null, refundId: null, code, confirms: 'reversal' }, async () => {
          sent += 1;
          return { providerQueryRef: `AG_${randomUUID()}` };
        })
      );
    const answers = await Promise.all(Array.from({ length: 20 }, ask));

    expect(sent).toBe(1);
    expect(answers.filter((a) => a === 'asked')).toHaveLength(1);
    expect(answers.filter((a) => a === 'open')).toHaveLength(19);
    const rows = await t.sql('SELECT id FROM provider_status_queries WHERE merchant_id = $1 AND code = $2', [merchantId, code]);
    expect(rows).toHaveLength(1);
  });

  it('asks again once the open query has expired (10 minutes unanswered), as before', async () => {
    const em = t.service.container.orm.em as unknown as EntityManager;
    const code = `RCPT${randomUUID().slice(0, 8).toUpperCase()}`;
    const ask = () =>
      t.inContext(() => askForConfirmation(em, { id: randomUUID(), provider: 'mobilemoney', merchantId, paymentId: null, refundId: null, code, confirms: 'reversal' }, async () => ({ providerQueryRef: 'AG_x' })));
    expect(await ask()).toBe('asked');
    expect(await ask()).toBe('open');
    await t.sql("UPDATE provider_status_queries SET created_at = now() - interval '11 minutes' WHERE merchant_id = $1 AND code = $2", [merchantId, code]);
    expect(await ask()).toBe('asked');
  });
});
