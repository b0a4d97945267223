import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import { startNameserver } from '../support/nameserver.js';
import { startTestService, type TestService } from '../support/service.js';

// Every URL the service or a provider will call follows one policy: with private URLs not allowed
// (production's default), only https to globally routable addresses. No address here is ever called:
// each is refused before anything is written or sent.

const NON_GLOBAL_HOSTS = [
  '[::127.0.0.1]', // IPv4-compatible IPv6 (::/96) — once accepted as "unicast"
  '[::ffff:127.0.0.1]', '[::ffff:10.0.0.1]', // IPv4-mapped
  '[64:ff9b::a00:1]', '[64:ff9b:1::1]', // NAT64 embedding 10.0.0.1; local-use NAT64
  '[2002:c0a8:1::1]', // 6to4 embedding 192.168.0.1
  '[2001:0:4136:e378:8000:63bf:3fff:fdd2]', // Teredo
  '[2001:db8::1]', '[3fff::1]', // documentation
  '[fc00::1]', '[fe80::1]', '[ff02::1]', '[::1]', '[::]', '[::ffff:0:a00:1]', '[100::1]',
  '127.0.0.1', '10.1.2.3', '172.16.0.1', '192.168.1.1', '169.254.169.254', '100.64.0.1', '0.0.0.0',
  '192.0.0.8', '192.0.2.10', '198.51.100.7', '203.0.113.9', '198.18.0.1', '224.0.0.1', '240.0.0.1', '255.255.255.255', '0x7f.1',
];

const MOBILEMONEY_CREDS = {
  env: 'sandbox', consumer_key: 'mm-consumer-key', consumer_secret: 'mm-consumer-secret',
  passkey: 'bfb279f9aa9bdbcf158e97dd71a467cd2e0c893059b10f78e6b72ada1ed2c919', shortcode: '174379', nominated_number: '254708374149',
};

let strict: TestService;
let key: string;
let merchantId: string;

beforeAll(async () => {
  strict = await startTestService({ WEBHOOK_ALLOW_PRIVATE_URLS: 'false' });
  ({ apiKey: key, merchantId } = await strict.createMerchant('Strict'));
  await strict.http.put('/v1/merchant/credentials').set('X-API-Key', key).send({ provider: 'mobilemoney', mobilemoney: MOBILEMONEY_CREDS }).expect(200);
});
afterAll(async () => strict?.stop());

describe('one outbound URL policy, private URLs not allowed', () => {
  it('refuses a webhook URL on any non-global address, IPv4-compatible, mapped, NAT64, 6to4 and Teredo included', async () => {
    for (const host of NON_GLOBAL_HOSTS) {
      const res = await strict.http.put('/v1/merchant/webhook').set('X-API-Key', key).send({ webhook_url: `https://${host}:4212/hook` });
      expect({ host, status: res.status, field: res.body.error?.details?.[0]?.field }).toEqual({ host, status: 422, field: 'webhook_url' });
      expect(res.body.error.message).toContain('webhook_url');
    }
    const [merchant] = await strict.sql<{ webhook_url: string | null }>('SELECT webhook_url FROM merchants WHERE id = $1', [merchantId]);
    expect(merchant!.webhook_url).toBeNull();
  });

  it('answers a host that does not resolve exactly as a private one, so the service\'s resolver cannot be probed for internal names', async () => {
    const issueFor = async (host: string) => {
      const res = await strict.http.put('/v1/merchant/webhook').set('X-API-Key', key).send({ webhook_url: `https://${host}/hook` });
      expect(res.status).toBe(422);
      return (res.body.error.details[0].issue as string).replace(host, '<host>');
    };
    expect(await issueFor('no-such-host-zz.invalid')).toBe(await issueFor('localhost'));
  });

  it('accepts a globally routable address, IPv4 or IPv6 (mapped or 6to4 forms of a public IPv4 too)', async () => {
    for (const host of ['93.184.215.14', '[2606:2800:21f:cb07:6820:80da:af6b:8b2c]', '[::ffff:93.184.215.14]', '[2002:5db8:d70e::1]']) {
      const res = await strict.http.put('/v1/merchant/webhook').set('X-API-Key', key).send({ webhook_url: `https://${host}/hook` });
      expect({ host, status: res.status }).toEqual({ host, status: 200 });
    }
  });

  it("refuses a mobile-money payment's callback_url on a private address: 422 naming the field, no payment, no push", async () => {
    for (const url of ['http://127.0.0.1:9/ssrf', 'https://127.0.0.1:9/ssrf', 'https://[::127.0.0.1]:9/ssrf', 'https://169.254.169.254/latest', 'https://localhost/x']) {
      const res = await strict.http
        .post('/v1/payments')
        .set('X-API-Key', key)
        .set('Idempotency-Key', `ssrf-${url}`)
        .send({ provider: 'mobilemoney', amount: '100', currency: 'KES', phone: '254708374149', callback_url: url });
      expect({ url, status: res.status }).toEqual({ url, status: 422 });
      expect(res.body.error.details).toEqual([{ field: 'callback_url', issue: expect.any(String) }]);
      expect(res.body.error.message).toContain('callback_url');
    }
    expect(await strict.sql('SELECT id FROM payments')).toEqual([]);
    expect(await strict.sql('SELECT checkout_request_id FROM sandbox_mobilemoney_stk_requests')).toEqual([]);
  });

  it("refuses register-pull's callback_url on a private address before the operator is called", async () => {
    const res = await strict.http
      .post('/v1/payments/mobilemoney/register-pull')
      .set('X-API-Key', key)
      .send({ nominated_number: '254708374149', callback_url: 'http://127.0.0.1:9/ssrf' });
    expect(res.status).toBe(422);
    expect(res.body.error.details).toEqual([{ field: 'callback_url', issue: expect.any(String) }]);
    const mapped = await strict.http
      .post('/v1/payments/mobilemoney/register-pull')
      .set('X-API-Key', key)
      .send({ callback_url: 'https://[::ffff:192.168.0.1]/pull' });
    expect(mapped.status).toBe(422);
    expect(await strict.sql('SELECT * FROM sandbox_mobilemoney_pull_registrations')).toEqual([]);
  });
});

describe('merchant hosts are resolved by the service\'s own resolver, private URLs not allowed', () => {
  // WEBHOOK_DNS_SERVERS points at a nameserver of the test's: it answers shop.answers.test with a public
  // address and never answers anything else (a merchant's domain whose nameserver is down).
  let nameserver: Awaited<ReturnType<typeof startNameserver>>;
  let s: TestService;
  let apiKey: string;
  beforeAll(async () => {
    nameserver = await startNameserver({ 'shop.answers.test': '93.184.215.14' });
    s = await startTestService({ WEBHOOK_ALLOW_PRIVATE_URLS: 'false', WEBHOOK_DNS_SERVERS: nameserver.address });
    ({ apiKey } = await s.createMerchant('Resolved'));
    await s.http.put('/v1/merchant/credentials').set('X-API-Key', apiKey).send({ provider: 'mobilemoney', mobilemoney: MOBILEMONEY_CREDS }).expect(200);
  });
  afterAll(async () => {
    await s?.stop();
    await nameserver?.close();
  });

  it('accepts a webhook URL whose host the nameserver resolves to a public address', async () => {
    await s.http.put('/v1/merchant/webhook').set('X-API-Key', apiKey).send({ webhook_url: 'https://shop.answers.test/hook' }).expect(200);
    expect(nameserver.asked).toContain('shop.answers.test');
  });

  it('refuses a webhook URL or callback_url whose host gets no answer, as one that does not resolve', async () => {
    const hook = await s.http.put('/v1/merchant/webhook').set('X-API-Key', apiKey).send({ webhook_url: 'https://shop.black-hole.test/hook' });
    expect(hook.status).toBe(422);
    expect(hook.body.error.details).toEqual([{ field: 'webhook_url', issue: 'host shop.black-hole.test must resolve to a public address' }]);
    const payment = await s.http.post('/v1/payments').set('X-API-Key', apiKey).set('Idempotency-Key', 'black-hole-callback')
      .send({ provider: 'mobilemoney', amount: '100', currency: 'KES', phone: '254708374149', callback_url: 'https://cb.black-hole.test/x' });
    expect(payment.status).toBe(422);
    expect(payment.body.error.details).toEqual([{ field: 'callback_url', issue: 'host cb.black-hole.test must resolve to a public address' }]);
    expect(nameserver.asked).toEqual(expect.arrayContaining(['shop.black-hole.test', 'cb.black-hole.test']));
    expect(await s.sql('SELECT id FROM payments')).toEqual([]);
  }, 30_000);
});
