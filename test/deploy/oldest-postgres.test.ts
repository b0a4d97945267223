import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import { chmod, mkdtemp, rm } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { startEmbeddedPostgres, type EmbeddedDatabase } from '../../server/persistence/embedded-postgres.js';
import { adminDatabaseUrl, sql } from '../support/database.js';
import { adminMerchant, baseEnv, callApi, freePort, migrateCli, startProcess, stopAllProcesses, storeCardpayCredentials } from '../support/processes.js';
import { eventually, WebhookReceiver } from '../support/webhook-receiver.js';

// spec/decisions.md: PostgreSQL 13 or newer. The suite's own server is newer (CI's 15, the embedded 18):
// here the oldest, 13 (the postgres-13 development dependency: embedded-postgres 13 under another name,
// PostgreSQL's own binaries), gets a fresh install — every migration — and the service, booted on it,
// takes a card payment and its refund, lists both and delivers their events.

let tempDir: string;
let pg13: EmbeddedDatabase;
let migrated: Awaited<ReturnType<typeof migrateCli>>;
const receiver = new WebhookReceiver();

beforeAll(async () => {
  tempDir = await mkdtemp(path.join(os.tmpdir(), 'payments-pg13-'));
  // As root the server runs as the postgres OS user, which must enter it.
  await chmod(tempDir, 0o755);
  pg13 = await startEmbeddedPostgres(path.join(tempDir, 'cluster'), { embeddedPackage: 'postgres-13', settings: { fsync: 'off', max_connections: '100' } });
  await receiver.start();
  // A fresh install, as an operator runs it before the first start.
  migrated = await migrateCli(pg13.url);
}, 90_000);

afterAll(async () => {
  await stopAllProcesses();
  await receiver.stop();
  await pg13?.stop();
  await rm(tempDir, { recursive: true, force: true });
}, 60_000);

describe('on PostgreSQL 13, the oldest supported', () => {
  it('a fresh install migrates, and the service takes, lists and refunds a card payment', async () => {
    const [server] = await sql<{ version: string }>(pg13.url, `SELECT current_setting('server_version_num') AS version`);
    expect(Math.floor(Number(server?.version) / 10_000)).toBe(13);
    expect([migrated.code, migrated.stderr]).toEqual([0, '']);
    const status = JSON.parse((await migrateCli(pg13.url, ['--status'])).stdout) as { pending: string[] };
    expect(status.pending).toEqual([]);

    const port = await freePort();
    const app = await startProcess('all', baseEnv(pg13.url, `http://127.0.0.1:${port}`, { PORT: String(port), MIGRATE_ON_BOOT: 'false' }));
    const call = (method: string, route: string, apiKey: string, body?: unknown, headers?: Record<string, string>) => callApi(app.url!, method, route, apiKey, body, headers);
    const { apiKey } = await adminMerchant(pg13.url, 'Oldest PostgreSQL Shop');
    expect(await storeCardpayCredentials(app.url!, apiKey, 'sk_test_pg13_0001')).toBe(200);
    expect((await call('PUT', '/v1/merchant/webhook', apiKey, { webhook_url: receiver.url })).status).toBe(200);

    const paid = await call('POST', '/v1/payments', apiKey, { provider: 'cardpay', amount: '12.00', currency: 'USD', payment_method: 'pm_card_visa' }, { 'Idempotency-Key': 'pg13-pay-1' });
    expect([paid.status, paid.body.data?.status]).toEqual([201, 'completed']);
    const paymentId = paid.body.data.id as string;
    const refunded = await call('POST', '/v1/refunds', apiKey, { payment_id: paymentId, amount: '5.00' }, { 'Idempotency-Key': 'pg13-refund-1' });
    expect([refunded.status, refunded.body.data?.status, refunded.body.data?.amount]).toEqual([201, 'completed', '5.00']);

    const payments = await call('GET', '/v1/payments', apiKey);
    expect([payments.status, payments.body.meta?.total, payments.body.data?.map((p: { id: string }) => p.id)]).toEqual([200, 1, [paymentId]]);
    const refunds = await call('GET', `/v1/refunds?payment_id=${paymentId}`, apiKey);
    expect([refunds.status, refunds.body.data?.map((r: { id: string; status: string }) => [r.id, r.status])]).toEqual([200, [[refunded.body.data.id, 'completed']]]);
    // The worker (Agenda's jobs, the delivery claims) runs on 13 too.
    await eventually(() => receiver.events('payment.completed').length === 1 && receiver.events('payment.refunded').length === 1, 20_000, 'the payment’s and the refund’s events');
    await app.stop();
  }, 90_000);

  it('counts payments in the same weeks as date_bin on a newer PostgreSQL', async () => {
    // Instants to the microsecond across 1952–2047, every Monday 00:00 UTC of 1990–2060 and a microsecond
    // either side, and every minute around the 2026 daylight-saving changes, in a zone that has them.
    const instants = `
      SELECT ts FROM (
        SELECT i, timestamptz '2000-01-03 00:00:00+00' + ((i * 29996224275833 % 3000000000000000) - 1500000000000000) * interval '1 microsecond' AS ts
          FROM generate_series(1::bigint, 100000) i
        UNION ALL
        SELECT 100000 + row_number() OVER (), m + d FROM generate_series(timestamptz '1990-01-01 00:00:00+00', timestamptz '2060-01-05 00:00:00+00', interval '168 hours') m,
               (VALUES (interval '0'), (interval '-1 microsecond'), (interval '1 microsecond')) x(d)
        UNION ALL
        SELECT 200000 + row_number() OVER (), t FROM generate_series(timestamptz '2026-03-07 00:00:00+00', timestamptz '2026-03-31 00:00:00+00', interval '1 minute') t
        UNION ALL
        SELECT 300000 + row_number() OVER (), t FROM generate_series(timestamptz '2026-10-24 00:00:00+00', timestamptz '2026-11-03 00:00:00+00', interval '1 minute') t
      ) s ORDER BY i`;
    const weeks = async (url: string, week: string) => {
      const inNewYork = new URL(url);
      inNewYork.searchParams.set('options', '-c TimeZone=America/New_York');
      const rows = await sql<{ w: string }>(inNewYork.toString(), `SELECT to_char((${week}) AT TIME ZONE 'UTC', 'YYYY-MM-DD HH24:MI:SS.US') AS w FROM (${instants}) v`);
      return rows.map((r) => r.w);
    };
    const onNewer = await weeks(adminDatabaseUrl(), `date_bin('7 days', ts, timestamptz '2000-01-03 00:00:00+00')`);
    const on13 = await weeks(pg13.url, 'payment_week(ts)');
    expect(on13.length).toBe(onNewer.length);
    expect(on13.length).toBeGreaterThan(150_000);
    const first = on13.findIndex((w, i) => w !== onNewer[i]);
    expect({ first, on13: on13[first], onNewer: onNewer[first] }).toEqual({ first: -1, on13: undefined, onNewer: undefined });
  }, 60_000);
});
