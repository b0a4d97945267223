import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import { createTestDatabase } from '../support/database.js';
import { adminMerchant, baseEnv, freePort, startProcess, stopAllProcesses, type ServiceProcess } from '../support/processes.js';

// One budget per API key however many api processes share the load, and however many of its requests
// arrive at once (each process counts the hits that arrive together in one statement).

const LIMIT = 25;
let db: Awaited<ReturnType<typeof createTestDatabase>>;
let apis: ServiceProcess[] = [];

beforeAll(async () => {
  db = await createTestDatabase();
  const port = await freePort();
  const publicUrl = `http://127.0.0.1:${port}`;
  const env = { RATE_LIMIT_PER_MINUTE: String(LIMIT) };
  apis = await Promise.all([
    startProcess('api', baseEnv(db.url, publicUrl, { ...env, PORT: String(port) }), { name: 'api1' }),
    startProcess('api', baseEnv(db.url, publicUrl, env), { name: 'api2' }),
  ]);
}, 120_000);

afterAll(async () => {
  await stopAllProcesses();
  await db?.drop();
}, 60_000);

async function burst(apiKey: string, requests: number) {
  return Promise.all(
    Array.from({ length: requests }, async (_, i) => {
      const res = await fetch(`${apis[i % apis.length]!.url}/v1/payments?page_size=1`, { headers: { 'X-API-Key': apiKey } });
      await res.arrayBuffer();
      return { status: res.status, remaining: Number(res.headers.get('x-ratelimit-remaining')) };
    }),
  );
}

describe('the per-key rate limit across two api processes', () => {
  it('lets exactly the budget through a burst sent to both at once, each admitted request counted once', async () => {
    const { apiKey } = await adminMerchant(db.url, 'Bursty');
    const other = await adminMerchant(db.url, 'Calm');
    // The whole test must fall in one one-minute window.
    const second = new Date().getUTCSeconds();
    if (second > 40) await new Promise((r) => setTimeout(r, (61 - second) * 1000));

    const first = await burst(apiKey, 80);
    const admitted = first.filter((r) => r.status === 200);
    expect(admitted).toHaveLength(LIMIT);
    expect(first.filter((r) => r.status === 429)).toHaveLength(80 - LIMIT);
    // Every admitted request had its own place in the window: remaining LIMIT-1 … 0, each once.
    expect(admitted.map((r) => r.remaining).sort((a, b) => a - b)).toEqual(Array.from({ length: LIMIT }, (_, i) => i));

    // The window stays closed in both processes; another key has its own budget.
    const again = await burst(apiKey, 10);
    expect(again.map((r) => r.status)).toEqual(Array(10).fill(429));
    expect((await burst(other.apiKey, 2)).map((r) => r.status)).toEqual([200, 200]);
  }, 120_000);
});
