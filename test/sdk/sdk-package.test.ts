import { execFile } from 'node:child_process';
import { mkdirSync, mkdtempSync, readdirSync, rmSync, statSync, writeFileSync } from 'node:fs';
import { readdir, readFile } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { promisify } from 'node:util';
import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import { createPaymentsClient } from '../../client/index.js';
import { startTestService, type TestService } from '../support/service.js';

/**
 * The SDK as a merchant installs it: `cd client && npm pack` (prepack builds it), the tarball
 * installed into an empty project (its dependencies from the local npm cache), then loaded with both
 * `import` and `require` and used against the real service.
 */

const run = promisify(execFile);
const root = path.resolve('.');
const work = mkdtempSync(path.join(os.tmpdir(), 'payments-sdk-pack-'));
const consumer = path.join(work, 'consumer');
let tarball: string;
let tarballBytes: number;
let packedFiles: string[];

function sizeOf(dir: string): number {
  let total = 0;
  for (const entry of readdirSync(dir, { withFileTypes: true })) {
    const full = path.join(dir, entry.name);
    if (entry.isDirectory()) total += sizeOf(full);
    else if (entry.isFile()) total += statSync(full).size;
  }
  return total;
}

async function filesUnder(dir: string): Promise<string[]> {
  const entries = await readdir(dir, { withFileTypes: true, recursive: true });
  return entries.filter((e) => e.isFile()).map((e) => path.join(e.parentPath, e.name));
}

const ESM = `
import { createPaymentsClient, PaymentsApiError, responseOf, signTestWebhook, verifyWebhook } from 'multi-provider-payments-sdk';
const client = createPaymentsClient({ baseUrl: process.env.BASE_URL, apiKey: process.env.API_KEY });
await client.merchant.storeCredentials({ provider: 'cardpay', cardpay: { secret_key: 'sk_test_packed_0001' } });
const body = { provider: 'cardpay', amount: '9.99', currency: 'USD', payment_method: 'pm_card_visa' };
const first = await client.payments.create(body, { idempotencyKey: 'packed-order-1' });
const again = await client.payments.create(body, { idempotencyKey: 'packed-order-1' });
const missing = await client.payments.get('00000000-0000-4000-8000-000000000000').catch((e) => e);
const listed = [];
for await (const p of client.payments.listAll({ page_size: 1 })) listed.push(p.id);
const signed = signTestWebhook({ type: 'payment.completed', data: { payment_id: first.id, amount: '9.99', currency: 'USD', provider: 'cardpay', status: 'completed', previous_status: 'pending' } }, 'whsec_cGFja2VkLWVzbS13ZWJob29rLXNlY3JldC0zMmJ5dGU=');
const verified = verifyWebhook(signed.body, signed.headers, 'whsec_cGFja2VkLWVzbS13ZWJob29rLXNlY3JldC0zMmJ5dGU=');
console.log(JSON.stringify({
  status: first.status, sameId: again.id === first.id,
  first: { requestId: first.$response.requestId, replayed: first.$response.replayed, status: first.$response.status },
  again: { replayed: responseOf(again).replayed, status: again.$response.status },
  enumerable: Object.keys(first).includes('$response'),
  listed: listed.length,
  error: { isApiError: missing instanceof PaymentsApiError, code: missing.code, status: missing.status },
  webhook: { type: verified.type, paymentId: verified.data.payment_id === first.id },
}));
`;

const CJS = `
delete globalThis.crypto; // as on Node 18 (engines >=18.18), which has no global crypto without a flag
const sdk = require('multi-provider-payments-sdk');
const signed = sdk.signTestWebhook({ type: 'payment.failed', data: { payment_id: 'p', amount: '1.00', currency: 'USD', provider: 'cardpay', status: 'failed', previous_status: 'pending' } }, 'whsec_cGFja2VkLWNqcy13ZWJob29rLXNlY3JldC0zMmJ5dGU=');
let tampered = null;
try { sdk.verifyWebhook(signed.body.replace('1.00', '9.00'), signed.headers, 'whsec_cGFja2VkLWNqcy13ZWJob29rLXNlY3JldC0zMmJ5dGU='); } catch (e) { tampered = e.reason; }
console.log(JSON.stringify({
  createPaymentsClient: typeof sdk.createPaymentsClient,
  PaymentsApiError: typeof sdk.PaymentsApiError,
  verified: sdk.verifyWebhook(signed.body, signed.headers, 'whsec_cGFja2VkLWNqcy13ZWJob29rLXNlY3JldC0zMmJ5dGU=').type,
  tampered,
  routes: Object.keys(sdk.contract).length > 3,
  idempotencyKey: sdk.createIdempotencyKey(),
}));
`;

/** A TypeScript consumer: the published declarations type-check a typical use, and catch a missing body. */
const TYPED = `
import { createPaymentsClient, type Payment } from 'multi-provider-payments-sdk';
const client = createPaymentsClient({ baseUrl: 'http://localhost:3000', apiKey: 'pk_x' });
export async function pay(): Promise<Payment> {
  const p = await client.payments.create({ provider: 'cardpay', amount: '1.00', currency: 'USD', payment_method: 'pm_card_visa' });
  const replayed: boolean = p.$response.replayed;
  const earlier: boolean = p.$response.earlierAttemptMayHaveSucceeded;
  void [replayed, earlier];
  return p;
}
export async function stopWebhooks(): Promise<null> {
  const removed = await client.merchant.deleteWebhook();
  const deleted: true = removed.deleted;
  void deleted;
  return removed.webhook_url;
}
`;

let t: TestService;
beforeAll(async () => {
  t = await startTestService();
  const packDir = path.join(work, 'pack');
  mkdirSync(packDir);
  const { stdout } = await run('npm', ['pack', '--json', '--pack-destination', packDir], { cwd: path.join(root, 'client'), maxBuffer: 16 * 1024 * 1024 });
  const [info] = JSON.parse(stdout) as { filename: string; size: number; files: { path: string }[] }[];
  tarball = path.join(packDir, info!.filename);
  tarballBytes = info!.size;
  packedFiles = info!.files.map((f) => f.path).sort();
  mkdirSync(consumer);
  writeFileSync(path.join(consumer, 'package.json'), JSON.stringify({ name: 'sdk-consumer', version: '1.0.0', private: true }));
  await run('npm', ['install', tarball, '--prefer-offline', '--no-audit', '--no-fund', '--loglevel=error'], { cwd: consumer });
}, 240_000);
afterAll(async () => {
  await t?.stop();
  rmSync(work, { recursive: true, force: true });
});

describe('the SDK package (client/)', () => {
  it('packs only its build, its README and LICENSE: package.json, ESM, CommonJS and declarations', async () => {
    expect(packedFiles).toEqual(expect.arrayContaining(['package.json', 'README.md', 'LICENSE', 'dist/index.js', 'dist/index.cjs', 'dist/types/client/index.d.ts', 'dist/types-cjs/client/index.d.ts', 'dist/types-cjs/package.json']));
    const unexpected = packedFiles.filter((f) => !['package.json', 'README.md', 'LICENSE'].includes(f) && !f.startsWith('dist/'));
    expect(unexpected).toEqual([]);
    expect(packedFiles.some((f) => /(^|\/)(server|test|bench)\//.test(f))).toBe(false);
    // A registry's page and a merchant's node_modules show them: the license the package declares, and how to start.
    const installed = path.join(consumer, 'node_modules/multi-provider-payments-sdk');
    const manifest = JSON.parse(await readFile(path.join(installed, 'package.json'), 'utf8')) as { license: string };
    expect(manifest.license).toBe('MIT');
    expect(await readFile(path.join(installed, 'LICENSE'), 'utf8')).toMatch(/^MIT License\n/);
    const readme = await readFile(path.join(installed, 'README.md'), 'utf8');
    for (const part of ['npm install /path/to/multi-provider-payments-sdk-<version>.tgz', 'createPaymentsClient(', 'payments.create(', 'PaymentsApiError', 'verifyWebhook(']) expect(readme).toContain(part);
    // The name is not published on the public registry (npm 404): a bare-name install would get whatever someone registers under it.
    expect(readme).not.toMatch(/^[ \t]*(npm|pnpm|yarn)[ \t]+(install|i|add)[ \t]+(\S+[ \t]+)*multi-provider-payments-sdk(@\S*)?[ \t]*$/m);
  });

  it('packs into at most 200 KB and installs into an empty project with zod and @ts-rest/core as its only dependencies, in at most 10 MB (as README says)', () => {
    expect(tarballBytes).toBeLessThanOrEqual(200 * 1000);
    const installed = readdirSync(path.join(consumer, 'node_modules')).filter((n) => !n.startsWith('.'));
    expect(installed.sort()).toEqual(['@ts-rest', 'multi-provider-payments-sdk', 'zod']);
    const bytes = sizeOf(path.join(consumer, 'node_modules'));
    expect(bytes).toBeLessThanOrEqual(10 * 1000 * 1000);
  });

  it("keeps its declarations small (at most 600 KB a flavour): a merchant's compiler and editor read them all", () => {
    // They were 2.4 MB a flavour while the contract's zod types were spelled out at every route and status.
    const sdk = path.join(consumer, 'node_modules/multi-provider-payments-sdk/dist');
    expect({ types: sizeOf(path.join(sdk, 'types')) <= 600_000, typesCjs: sizeOf(path.join(sdk, 'types-cjs')) <= 600_000 }).toEqual({ types: true, typesCjs: true });
  });

  it('loads with import and works against the service: request id and replayed flag on results, listAll, typed errors, test webhooks', async () => {
    const { apiKey } = await t.createMerchant('Packed SDK Shop');
    writeFileSync(path.join(consumer, 'esm.mjs'), ESM);
    const { stdout } = await run(process.execPath, ['esm.mjs'], { cwd: consumer, env: { ...process.env, NODE_OPTIONS: '', BASE_URL: t.baseUrl, API_KEY: apiKey } });
    expect(JSON.parse(stdout.trim())).toEqual({
      status: 'completed',
      sameId: true,
      first: { requestId: expect.stringMatching(/^[0-9a-f-]{36}$/), replayed: false, status: 201 },
      again: { replayed: true, status: 200 },
      enumerable: false,
      listed: 1,
      error: { isApiError: true, code: 'NOT_FOUND', status: 404 },
      webhook: { type: 'payment.completed', paymentId: true },
    });
  });

  it('loads with require (CommonJS), and generates Idempotency-Keys without a global crypto', async () => {
    writeFileSync(path.join(consumer, 'cjs.cjs'), CJS);
    const { stdout } = await run(process.execPath, ['cjs.cjs'], { cwd: consumer, env: { ...process.env, NODE_OPTIONS: '' } });
    expect(JSON.parse(stdout.trim())).toEqual({ createPaymentsClient: 'function', PaymentsApiError: 'function', verified: 'payment.failed', tampered: 'signature_mismatch', routes: true,
      idempotencyKey: expect.stringMatching(/^[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$/),
    });
  });

  it('its declarations type-check a TypeScript consumer (CommonJS, module nodenext and node16 — @tsconfig/node18 and node20 use node16)', async () => {
    writeFileSync(path.join(consumer, 'typed.ts'), TYPED);
    const tsc = path.join(root, 'node_modules/typescript/bin/tsc');
    const compile = (module: string, ...more: string[]) =>
      ['--noEmit', '--strict', '--module', module, '--moduleResolution', module, '--target', 'es2022', '--typeRoots', path.join(root, 'node_modules/@types'), '--types', 'node', ...more, 'typed.ts'];
    // Once with the package's declarations checked too (no skipLibCheck: ~20 s of CPU here, the contract's
    // zod types are large); node16 as @tsconfig/node18 and node20 set it, with skipLibCheck.
    await expect(run(process.execPath, [tsc, ...compile('nodenext')], { cwd: consumer })).resolves.toBeDefined();
    await expect(run(process.execPath, [tsc, ...compile('node16', '--skipLibCheck')], { cwd: consumer })).resolves.toBeDefined();
    // The types are real (not `any` from an unresolved import): a call missing its argument is an error.
    writeFileSync(path.join(consumer, 'typed.ts'), TYPED.replace("{ provider: 'cardpay', amount: '1.00', currency: 'USD', payment_method: 'pm_card_visa' }", ''));
    const broken = await run(process.execPath, [tsc, ...compile('node16', '--skipLibCheck')], { cwd: consumer }).catch((e: { stdout: string }) => e);
    expect((broken as { stdout: string }).stdout).toContain('typed.ts');
  }, 180_000);

  it('the sources depend on nothing but the contract, @ts-rest/core, zod and Node built-ins; the bundles only on zod and @ts-rest/core', async () => {
    const allowed = /^(\.{1,2}\/|@ts-rest\/core$|zod$|@anatine\/zod-openapi$|node:)/;
    const sources = [...(await filesUnder('client')), ...(await filesUnder('contract'))].filter((f) => /\.ts$/.test(f) && !f.includes(`${path.sep}dist${path.sep}`));
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
    const bundle = await readFile(path.join(consumer, 'node_modules/multi-provider-payments-sdk/dist/index.js'), 'utf8');
    const imported = new Set([...bundle.matchAll(/from\s*['"]([^'"]+)['"]/g)].map((m) => m[1]));
    expect([...imported].sort()).toEqual(['@ts-rest/core', 'node:crypto', 'zod']);
  });

  it("README's SDK method table names every method of every namespace, in that namespace's row", async () => {
    // merchant.deleteWebhook() (0.2.5) was missing from client.merchant's row.
    const readme = await readFile(path.join(root, 'README.md'), 'utf8');
    const client = createPaymentsClient({ baseUrl: 'http://payments.test', apiKey: 'pk_test_fake', fetch: (async () => new Response('{}')) as typeof fetch });
    const missing: string[] = [];
    for (const [namespace, methods] of Object.entries(client)) {
      if (namespace === 'raw') continue;
      const row = new RegExp(`^\\| \`client\\.${namespace}\` \\|(.*)\\|$`, 'm').exec(readme)?.[1] ?? '';
      for (const method of Object.keys(methods as object)) if (!row.includes(`\`${method}(`)) missing.push(`client.${namespace}.${method}`);
    }
    expect(missing).toEqual([]);
  });
});
