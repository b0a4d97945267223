import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import express from 'express';
import { ConfigError, parseTrustProxy } from '../../server/config/config.js';
import { startTestService, type TestService } from '../support/service.js';

/**
 * The mobile-money callback allowlist behind a load balancer: with TRUST_PROXY naming the proxy, the
 * client address is the one the proxy forwarded; without it, X-Forwarded-For is not believed (anyone
 * can send that header).
 */
const OPERATOR_IP = '196.201.214.200';
const stkBody = {
  Body: { stkCallback: { MerchantRequestID: 'm-1', CheckoutRequestID: 'ws_CO_unknown', ResultCode: 1032, ResultDesc: 'Request cancelled by user' } },
};

let behindProxy: TestService;
let direct: TestService;
beforeAll(async () => {
  // Sandbox off: loopback is not an allowed callback source, only the operator's addresses are.
  const env = { SANDBOX: 'false', MOBILEMONEY_CALLBACK_ALLOWLIST: OPERATOR_IP, MOBILEMONEY_BASE_URL: 'http://127.0.0.1:9/unused' };
  behindProxy = await startTestService({ ...env, TRUST_PROXY: 'loopback' });
  direct = await startTestService(env);
});
afterAll(async () => {
  await behindProxy.stop();
  await direct.stop();
});

const callback = (t: TestService, forwardedFor?: string) => {
  const req = t.http.post('/v1/webhooks/mobilemoney');
  return (forwardedFor ? req.set('X-Forwarded-For', forwardedFor) : req).send(stkBody);
};

describe('TRUST_PROXY', () => {
  it('behind a trusted proxy, an operator address forwarded by it passes the allowlist; another address does not', async () => {
    const accepted = await callback(behindProxy, OPERATOR_IP);
    expect(accepted.status).toBe(200);
    const refused = await callback(behindProxy, '203.0.113.9');
    expect(refused.status).toBe(401);
    expect(refused.body.error).toMatchObject({ code: 'UNAUTHORIZED', message: expect.stringContaining('source address') });
    // A spoofed hop before the proxy's own entry does not help: the proxy-appended (rightmost) address counts.
    expect((await callback(behindProxy, `${OPERATOR_IP}, 203.0.113.9`)).status).toBe(401);
  });

  it('off by default: X-Forwarded-For is ignored and the socket address (not on the allowlist) is refused', async () => {
    const res = await callback(direct, OPERATOR_IP);
    expect(res.status).toBe(401);
  });

  it('takes a hop count, or addresses and subnets; anything else, true included, stops the boot with a clear message', () => {
    expect(parseTrustProxy(undefined)).toBe(false);
    expect(parseTrustProxy('false')).toBe(false);
    // true believed the left-most X-Forwarded-For entry, which the client writes: `196.201.214.200, <real>`
    // passed the operator allowlist from anywhere.
    expect(() => parseTrustProxy('true')).toThrow(/hop count|number of proxies/);
    expect(() => parseTrustProxy('yes')).toThrow(ConfigError);
    expect(parseTrustProxy('1')).toBe(1);
    expect(parseTrustProxy('loopback, 10.0.0.0/8')).toEqual(['loopback', '10.0.0.0/8']);
    expect(() => parseTrustProxy('everyone')).toThrow(ConfigError);
  });
  it('an address or subnet Express would refuse (a prefix past 32/128 or of 0, three-part IPv4) stops the boot naming TRUST_PROXY, not the API after it listened and migrated', () => {
    const typos = ['10.0.0.0/33', '1.2.3', '::1/200', '127.1', '0.0.0.0/0', '::1/0', '10.0.0.0/', '1.2.3.256', 'loopback, 10.0.0.0/33'];
    for (const typo of typos) {
      expect({ typo, error: (() => { try { parseTrustProxy(typo); return null; } catch (err) { return err instanceof ConfigError && err.message; } })() })
        .toEqual({ typo, error: expect.stringContaining('TRUST_PROXY') });
    }
    const valid = ['10.0.0.0/8', '10.0.0.1', '192.168.0.0/16, loopback', '::1', '::1/128', 'fd00::/8', '::ffff:10.0.0.1', '2001:db8::/32, 172.16.0.0/12', 'uniquelocal, linklocal'];
    for (const value of valid) {
      const parsed = parseTrustProxy(value);
      expect(parsed).toEqual(value.split(',').map((s) => s.trim()));
      // What the configuration lets through, the API's `app.set('trust proxy', …)` compiles.
      expect(() => express().set('trust proxy', parsed)).not.toThrow();
    }
    // And the typos are the very values Express throws on.
    for (const typo of typos) expect(() => express().set('trust proxy', typo.split(',').map((s) => s.trim()))).toThrow();
  });
});
