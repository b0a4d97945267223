import { spawn, type ChildProcess } from 'node:child_process';
import { chmodSync, mkdtempSync, readFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';

/** Generous: child processes compete with the rest of the suite for two cores. */
const SLOW = 180_000;
import { eventually } from '../support/webhook-receiver.js';
import { freePort } from '../../server/net/free-port.js';

// `npm start` on a fresh machine: no DATABASE_URL, so the service starts its own embedded PostgreSQL
// in the data folder, applies migrations, serves the API, docs and simulators, and runs the worker.
// The admin CLI then reaches the same embedded cluster.

let child: ChildProcess;
let base: string;
let dataDir: string;
let output = '';


function cleanEnv(extra: Record<string, string>): NodeJS.ProcessEnv {
  const env: NodeJS.ProcessEnv = { ...process.env, ...extra };
  delete env.DATABASE_URL;
  delete env.TEST_DATABASE_URL;
  delete env.NODE_OPTIONS;
  return env;
}

const TSX = path.resolve('node_modules/tsx/dist/cli.mjs');

/** `npm run admin -- …` (asynchronously: a blocking spawn would stall this process's sockets). */
const admin = (args: string[]) => command('server/admin/cli.ts', args);

/** A one-shot command of the repository (`npm run admin`, `npm run migrate`) beside the running service. */
async function command(script: string, args: string[]): Promise<{ status: number | null; stdout: string; stderr: string }> {
  const proc = spawn(process.execPath, [TSX, script, ...args], { env: cleanEnv({ DATA_DIR: dataDir }) });
  let stdout = '';
  let stderr = '';
  proc.stdout.on('data', (d: Buffer) => (stdout += d.toString()));
  proc.stderr.on('data', (d: Buffer) => (stderr += d.toString()));
  const status = await new Promise<number | null>((resolve) => proc.once('exit', (code) => resolve(code)));
  return { status, stdout: stdout.trim(), stderr };
}

beforeAll(async () => {
  dataDir = mkdtempSync(path.join(os.tmpdir(), 'payments-start-'));
  // As root, PostgreSQL runs as the `postgres` user, which must be able to enter the data folder.
  chmodSync(dataDir, 0o755);
  const port = await freePort();
  base = `http://127.0.0.1:${port}`;
  const startScript = (JSON.parse(readFileSync('package.json', 'utf8')) as { scripts: { start: string } }).scripts.start;
  const [exec, command, ...nodeArgs] = startScript.split(/\s+/);
  // `exec`: npm's shell is replaced by node, so the signals npm forwards reach the service.
  expect({ exec, command, script: nodeArgs.at(-1) }).toEqual({ exec: 'exec', command: 'node', script: 'server/main.ts' });
  // `npm start` itself, in a process group of its own, as a terminal runs it.
  child = spawn('npm', ['start'], { env: cleanEnv({ PORT: String(port), DATA_DIR: dataDir, LOG_LEVEL: 'info' }), stdio: ['ignore', 'pipe', 'pipe'], detached: true });
  child.stdout!.on('data', (d: Buffer) => (output += d.toString()));
  child.stderr!.on('data', (d: Buffer) => (output += d.toString()));
  await eventually(() => fetch(`${base}/readyz`).then((r) => r.status === 200, () => false), 150_000, 'npm start to be ready');
}, SLOW);

afterAll(async () => {
  if (child.exitCode === null && child.signalCode === null) {
    process.kill(-child.pid!, 'SIGTERM');
    await new Promise((resolve) => child.once('exit', resolve));
  }
});

const itSlow = (name: string, fn: () => Promise<void>) => it(name, fn, SLOW);

describe('npm start with no database configured', () => {
  itSlow('serves health, readiness, docs and the OpenAPI document from an embedded PostgreSQL', async () => {
    expect((await fetch(`${base}/healthz`)).status).toBe(200);
    const ready = (await (await fetch(`${base}/readyz`)).json()) as { data: { checks: Record<string, boolean> } };
    expect(ready.data.checks).toEqual({ database: true, job_runner: true });
    const docs = await fetch(`${base}/docs/`);
    expect(docs.status).toBe(200);
    expect(await docs.text()).toContain('swagger-ui');
    const spec = (await (await fetch(`${base}/openapi.json`)).json()) as { paths: Record<string, unknown> };
    expect(Object.keys(spec.paths)).toContain('/v1/payments');
    expect(output).toContain('embedded PostgreSQL');
  });

  itSlow('the admin CLI issues a merchant and a key that work against the running service', async () => {
    const merchant = await admin(['merchant', 'create', '--name', 'Fresh Machine Ltd']);
    expect(merchant.status).toBe(0);
    const { merchant_id } = JSON.parse(merchant.stdout) as { merchant_id: string };
    const key = await admin(['key', 'create', '--merchant', merchant_id, '--scopes', 'merchant:read,merchant:write']);
    expect(key.status).toBe(0);
    const { key: apiKey, id } = JSON.parse(key.stdout) as { key: string; id: string };
    expect(apiKey).toMatch(/^pk_[A-Za-z0-9_-]{43}$/);

    const me = await fetch(`${base}/v1/merchant`, { headers: { 'X-API-Key': apiKey } });
    expect(me.status).toBe(200);
    expect(((await me.json()) as { data: { name: string } }).data.name).toBe('Fresh Machine Ltd');

    const list = await admin(['key', 'list', '--merchant', merchant_id]);
    expect(JSON.parse(list.stdout)).toEqual([expect.objectContaining({ id, scopes: ['merchant:read', 'merchant:write'], revoked_at: null })]);
    expect((await admin(['key', 'revoke', '--id', id])).status).toBe(0);
    // Every process honours a revocation within one second (its key cache is invalidated by NOTIFY).
    // (test/caching/access-cache.test.ts holds the one-second bound across two api processes.)
    await eventually(async () => (await fetch(`${base}/v1/merchant`, { headers: { 'X-API-Key': apiKey } })).status === 401, 5_000, 'the revoked key refused');
  });

  itSlow('the admin CLI reports bad input on stderr with a non-zero exit', async () => {
    const badScope = await admin(['key', 'create', '--merchant', '00000000-0000-4000-8000-000000000000', '--scopes', 'payments:everything']);
    expect(badScope.status).not.toBe(0);
    expect(badScope.stdout).toBe('');
    expect(badScope.stderr).toContain('unknown scope');
    const usage = await admin(['merchant', 'delete']);
    expect(usage.status).not.toBe(0);
    expect(usage.stderr).toContain('usage');
    const unknownMerchant = await admin(['key', 'create', '--merchant', '00000000-0000-4000-8000-000000000000', '--scopes', 'payments:read']);
    expect(unknownMerchant.status).not.toBe(0);
    expect(unknownMerchant.stderr).toContain('not found');
  });

  itSlow('npm run migrate reaches the embedded cluster the running service holds (a second postmaster failed on its lock file)', async () => {
    const status = await command('server/migrate.ts', ['--status']);
    expect({ status: status.status, stderr: status.stderr }).toEqual({ status: 0, stderr: '' });
    expect(JSON.parse(status.stdout)).toMatchObject({ applied: expect.arrayContaining([expect.any(String)]), pending: [] });
    const up = await command('server/migrate.ts', []);
    expect([up.status, JSON.parse(up.stdout)]).toEqual([0, { applied: [] }]);
  });

  itSlow('stops gracefully on Ctrl-C (SIGINT to the whole group: npm, which passes it on to the service, the service and its PostgreSQL)', async () => {
    process.kill(-child.pid!, 'SIGINT');
    const code = await new Promise<number | null>((resolve) => child.once('exit', (c) => resolve(c)));
    // On failure, show what the service printed while stopping.
    expect({ code, log: code === 0 ? '' : output.slice(output.indexOf('shutting down') - 200) }).toEqual({ code: 0, log: '' });
    expect(output).toContain('shutting down');
  });
});
