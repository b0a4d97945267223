import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import { startTestService, type TestService } from '../support/service.js';

/**
 * POST /v1/payments/mobilemoney/reconcile serves only windows the operator's pull can: it lists the last 48
 * hours (interface.md "Limits": pull reconciliation window, last 48 hours). A window reaching further back, or
 * into the future, is 422 naming the bound — before, it was 200 with zeros (or with the part older than 48
 * hours silently left out): a report saying nothing was missed where nothing could be looked at. A minute of
 * difference between the client's clock and ours is allowed at either end.
 */
const HOUR = 3_600_000;
let t: TestService;
let key: string;

beforeAll(async () => {
  t = await startTestService({ MOBILEMONEY_RECONCILE_INTERVAL: '1h' });
  ({ apiKey: key } = await t.createMerchant('Reconcile Window Duka'));
  await t.http.put('/v1/merchant/credentials').set('X-API-Key', key).send({
    provider: 'mobilemoney',
    mobilemoney: { env: 'sandbox', consumer_key: 'window-key', consumer_secret: 'window-secret', passkey: 'bfb279f9aa9bdbcf158e97dd71a467cd2e0c893059b10f78e6b72ada1ed2c919', shortcode: '174379' },
  }).expect(200);
});
afterAll(async () => {
  await t.stop();
});

const at = (offsetMs: number) => new Date(Date.now() + offsetMs).toISOString();
const reconcile = (body: Record<string, string>) => t.http.post('/v1/payments/mobilemoney/reconcile').set('X-API-Key', key).send(body);

describe('a reconcile window the pull cannot serve', () => {
  it('is 422 naming the bound: until older than 48 hours, since older than 48 hours, until in the future', async () => {
    const cases: [Record<string, string>, string, string][] = [
      // since defaulted to until − 48 h: nothing of it is listed any more.
      [{ until: at(-72 * HOUR) }, 'until', 'must be within the last 48 hours'],
      // 40 hours, of which the first 12 are no longer listed.
      [{ since: at(-60 * HOUR), until: at(-20 * HOUR) }, 'since', 'must be within the last 48 hours'],
      [{ since: at(-49 * HOUR) }, 'since', 'must be within the last 48 hours'],
      [{ until: at(48 * HOUR) }, 'until', 'must not be in the future'],
      [{ since: at(-HOUR), until: at(5 * 60_000) }, 'until', 'must not be in the future'],
    ];
    for (const [body, field, issue] of cases) {
      const res = await reconcile(body);
      expect({ body, status: res.status, code: res.body.error?.code, details: res.body.error?.details }) // was 200 with zeros
        .toEqual({ body, status: 422, code: 'VALIDATION_ERROR', details: [{ field, issue: expect.stringContaining(issue) }] });
    }
  });

  it('is served within the last 48 hours, a minute of clock difference allowed at either end', async () => {
    const served: Record<string, string>[] = [
      {},
      { since: at(-48 * HOUR + 60_000) },
      // "48 hours ago" by a client clock 30 s behind ours, and "now" by one 30 s ahead.
      { since: at(-48 * HOUR - 30_000) },
      { until: at(30_000) },
      { since: at(-20 * HOUR), until: at(-HOUR) },
    ];
    for (const body of served) {
      const res = await reconcile(body);
      expect({ body, status: res.status }).toEqual({ body, status: 200 });
      expect(res.body.data).toMatchObject({ pulled: expect.any(Number), results: expect.any(Array) });
    }
  });
});
