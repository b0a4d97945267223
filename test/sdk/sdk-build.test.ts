import { execFile } from 'node:child_process';
import { existsSync } from 'node:fs';
import { readdir, readFile } from 'node:fs/promises';
import path from 'node:path';
import { promisify } from 'node:util';
import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import { startTestService, type TestService } from '../support/service.js';

const run = promisify(execFile);
const root = path.resolve('.');

/** Runs as a plain Node ESM script: imports the package's `./client` export, exactly as a merchant would. */
const SCRIPT = `
import { createPaymentsClient, PaymentsApiError, verifyWebhook } from 'multi-provider-payments/client';
const client = createPaymentsClient({ baseUrl: process.env.BASE_URL, apiKey: process.env.API_KEY });
await client.merchant.storeCredentials({ provider: 'cardpay', cardpay: { secret_key: 'sk_test_built_0001' } });
const payment = await client.payments.create({ provider: 'cardpay', amount: '9.99', currency: 'USD', payment_method: 'pm_card_visa' });
const missing = await client.payments.get('00000000-0000-4000-8000-000000000000').catch((e) => e);
const listed = [];
for await (const p of client.payments.listAll({ page_size: 1 })) listed.push(p.id);
console.log(JSON.stringify({
  status: payment.status, key: payment.idempotency_key, listed,
  error: { isApiError: missing instanceof PaymentsApiError, code: missing.code, status: missing.status },
  verifyWebhook: typeof verifyWebhook,
}));
`;

async function filesUnder(dir: string): Promise<string[]> {
  const entries = await readdir(dir, { withFileTypes: true, recursive: true });
  return entries.filter((e) => e.isFile()).map((e) => path.join(e.parentPath, e.name));
}

let t: TestService;
beforeAll(async () => {
  t = await startTestService();
  await run(process.execPath, [path.join(root, 'node_modules/typescript/bin/tsc'), '-p', 'tsconfig.client.json'], { cwd: root });
}, 120_000);
afterAll(async () => {
  await t.stop();
});

describe('the built SDK (npm run build:client)', () => {
  it('package.json exports ./client and ./contract point at built ESM and .d.ts files', async () => {
    const pkg = JSON.parse(await readFile('package.json', 'utf8'));
    for (const entry of ['./client', './contract']) {
      const { types, import: esm } = pkg.exports[entry];
      expect(existsSync(path.join(root, types))).toBe(true);
      expect(existsSync(path.join(root, esm))).toBe(true);
    }
    const dts = await readFile(path.join(root, pkg.exports['./client'].types), 'utf8');
    expect(dts).toContain('createPaymentsClient');
    expect(dts).toContain('PaymentsApiError');
  });

  it('imports in plain Node and works against the service', async () => {
    const { apiKey } = await t.createMerchant('Built SDK Shop');
    const { stdout } = await run(process.execPath, ['--input-type=module', '-e', SCRIPT], {
      cwd: root,
      env: { ...process.env, NODE_OPTIONS: '', BASE_URL: t.baseUrl, API_KEY: apiKey },
    });
    const out = JSON.parse(stdout.trim());
    expect(out).toEqual({
      status: 'completed',
      key: expect.stringMatching(/^[0-9a-f-]{36}$/),
      listed: [expect.any(String)],
      error: { isApiError: true, code: 'NOT_FOUND', status: 404 },
      verifyWebhook: 'function',
    });
  });

  it('depends on nothing but the contract, @ts-rest/core, zod and Node built-ins', async () => {
    const allowed = /^(\.{1,2}\/|@ts-rest\/core$|zod$|@anatine\/zod-openapi$|node:)/;
    const sources = [...(await filesUnder('client')), ...(await filesUnder('contract')), ...(await filesUnder('dist/client'))].filter((f) => /\.(ts|js)$/.test(f));
    const offending: string[] = [];
    for (const file of sources) {
      const text = await readFile(file, 'utf8');
      for (const match of text.matchAll(/(?:from|import)\s*\(?\s*['"]([^'"]+)['"]/g)) {
        const specifier = match[1]!;
        const resolved = specifier.startsWith('.') ? path.relative(root, path.resolve(path.dirname(file), specifier)) : specifier;
        if (!allowed.test(specifier) || /^(server|test|scripts)\//.test(resolved)) offending.push(`${file}: ${specifier}`);
      }
    }
    expect(offending).toEqual([]);
  });
});
