import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import { startNameserver } from '../support/nameserver.js';
import { startTestService, type TestService } from '../support/service.js';
import { attemptsOf, delivery, emitEvent, registerWebhook } from './events.js';
import { WebhookReceiver, waitFor } from './receiver.js';

/**
 * What one merchant's endpoint does must not hold back another merchant's deliveries, also where they
 * share something below the delivery slots: a host (a platform hosting many shops) or the resolver.
 */

/** A merchant whose webhook goes to `url`. */
async function merchantAt(t: TestService, name: string, url: string) {
  const m = await t.createMerchant(name);
  await registerWebhook(t, m.apiKey, url);
  return m;
}

const delivered = (t: TestService, id: string, what: string) =>
  waitFor(async () => ((await delivery(t, id)).status === 'delivered' ? true : null), what, 10_000);

describe('merchants whose endpoints are on one host', () => {
  // Attempts wait 60 s for an answer: no hanging attempt times out (freeing a connection) while the test looks.
  let t: TestService;
  let receiver: WebhookReceiver;
  beforeAll(async () => {
    receiver = await new WebhookReceiver().start();
    t = await startTestService({ WEBHOOK_TIMEOUT_MS: '60000', WEBHOOK_MAX_IN_FLIGHT_PER_MERCHANT: '16' });
  });
  afterAll(async () => {
    await receiver.stop(); // the held attempts fail now, so the stop does not wait for them
    await t.stop();
  });

  it("two merchants' paths that never answer do not hold back a third merchant's delivery to the same host", async () => {
    receiver.hangNext('/shop-a', Number.POSITIVE_INFINITY);
    receiver.hangNext('/shop-b', Number.POSITIVE_INFINITY);
    const a = await merchantAt(t, 'Shop A', receiver.url('/shop-a'));
    const b = await merchantAt(t, 'Shop B', receiver.url('/shop-b'));
    for (let i = 0; i < 20; i++) {
      await emitEvent(t, a.merchantId);
      await emitEvent(t, b.merchantId);
    }
    // Each is sending its whole share (16), all to the receiver's one host:port, none answered.
    await waitFor(async () => receiver.on('/shop-a').length >= 16 && receiver.on('/shop-b').length >= 16, 'both shares in flight');

    const c = await merchantAt(t, 'Shop C', receiver.url('/shop-c'));
    const { deliveryId, paymentId } = await emitEvent(t, c.merchantId);
    await delivered(t, deliveryId, "shop C's delivery");
    expect(receiver.on('/shop-c').map((r) => JSON.parse(r.body).data.payment_id)).toEqual([paymentId]);
    expect((await attemptsOf(t, deliveryId)).map((a) => a.error)).toEqual([null]);
    // A's and B's attempts are all still waiting for their answers: nothing freed a connection for C.
    expect([receiver.on('/shop-a').length, receiver.on('/shop-b').length]).toEqual([16, 16]);
  }, 120_000);
});

describe('a merchant whose webhook host has a nameserver that never answers', () => {
  let t: TestService;
  let receiver: WebhookReceiver;
  let nameserver: Awaited<ReturnType<typeof startNameserver>>;
  beforeAll(async () => {
    receiver = await new WebhookReceiver().start();
    nameserver = await startNameserver(); // answers no name
    // Every merchant host not in /etc/hosts is asked of the black hole. Attempts wait up to 30 s, as in
    // production: a lookup that gets no answer fails on its own, well before.
    t = await startTestService({ WEBHOOK_DNS_SERVERS: nameserver.address, WEBHOOK_TIMEOUT_MS: '30000' });
  });
  afterAll(async () => {
    await receiver.stop();
    await nameserver.close();
    await t.stop();
  });

  it("its attempts fail as DNS timeouts and are retried; other merchants' deliveries go out meanwhile", async () => {
    const port = new URL(receiver.url('/')).port;
    const host = 'shop-a.black-hole.test';
    const a = await merchantAt(t, 'Unresolvable', `http://${host}:${port}/shop-a`);
    const ids: string[] = [];
    for (let i = 0; i < 20; i++) ids.push((await emitEvent(t, a.merchantId)).deliveryId);
    await waitFor(async () => nameserver.asked.includes(host), 'the lookup of shop A\'s host');

    // While A's lookups wait for their answer: a merchant on an address literal, and one on localhost
    // (answered from /etc/hosts, never asked of the nameserver).
    const b = await merchantAt(t, 'On 127.0.0.1', receiver.url('/shop-b'));
    const c = await merchantAt(t, 'On localhost', `http://localhost:${port}/shop-c`);
    const toB = await emitEvent(t, b.merchantId);
    const toC = await emitEvent(t, c.merchantId);
    await delivered(t, toB.deliveryId, "shop B's delivery");
    await delivered(t, toC.deliveryId, "shop C's delivery");
    expect(receiver.on('/shop-b')).toHaveLength(1);
    expect(receiver.on('/shop-c')).toHaveLength(1);
    expect(nameserver.asked.filter((name) => name !== host)).toEqual([]);

    // A's first attempts fail with the lookup's own error, and the deliveries go on to their retries.
    const first = ids[0]!;
    const tried = await waitFor(async () => {
      const attempts = await attemptsOf(t, first);
      return attempts.length >= 2 ? attempts : null;
    }, "a retry of shop A's first delivery", 30_000);
    expect(tried.slice(0, 2).map((attempt) => attempt.error)).toEqual([`DNS lookup for ${host} timed out`, `DNS lookup for ${host} timed out`]);
    expect(receiver.on('/shop-a')).toHaveLength(0);
  }, 120_000);
});
