import { spawn } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import { TEST_ENCRYPTION_KEY, startTestService, type TestService } from '../support/service.js';
import { freePort } from '../../server/net/free-port.js';

// Runs the README's "Quick start" exactly as a newcomer would paste it (the bash block between the
// quick-start markers), against a running service, and checks what it promises.

let t: TestService;
const LOG = path.resolve('webhooks.log');

function quickStartScript(): string {
  const readme = readFileSync('README.md', 'utf8');
  const block = /<!-- quick-start:begin -->\s*```bash\n([\s\S]*?)```\s*<!-- quick-start:end -->/.exec(readme);
  if (!block) throw new Error('README.md has no quick-start block');
  return block[1]!;
}


beforeAll(async () => {
  t = await startTestService({ SANDBOX_CALLBACK_DELAY_MS: '300' });
});
afterAll(async () => {
  await t.stop();
  rmSync(LOG, { force: true });
});

describe('README quick start', () => {
  it('runs as written: three payments, a capture, a refund, and verified webhooks', async () => {
    const env: NodeJS.ProcessEnv = {
      ...process.env,
      BASE: t.baseUrl,
      RECEIVER_PORT: String(await freePort()),
      DATABASE_URL: t.databaseUrl,
      ENCRYPTION_KEY: TEST_ENCRYPTION_KEY,
      DATA_DIR: mkdtempSync(path.join(os.tmpdir(), 'quick-start-')),
    };
    delete env.NODE_OPTIONS;
    const child = spawn('bash', ['-euo', 'pipefail', '-c', quickStartScript()], { env, detached: true });
    let stdout = '';
    let stderr = '';
    child.stdout.on('data', (d: Buffer) => (stdout += d.toString()));
    child.stderr.on('data', (d: Buffer) => (stderr += d.toString()));
    const code = await new Promise<number | null>((resolve) => child.once('exit', (c) => resolve(c)));
    // The script leaves its receiver running in the background, as the README says: stop it.
    try {
      process.kill(-child.pid!, 'SIGTERM');
    } catch {
      // already gone
    }
    expect({ code, stderr: code === 0 ? '' : stderr }).toEqual({ code: 0, stderr: '' });

    const capture = /\{"success":true,"data":\{"id":"[^"]+","status":"(\w+)"[^}]*"provider":"walletpay"/.exec(stdout);
    expect(capture?.[1]).toBe('completed');
    const list = JSON.parse(stdout.trim().split('\n').find((line) => line.includes('"meta"'))!) as { data: { provider: string; status: string }[] };
    expect(list.data.map((p) => `${p.provider}:${p.status}`).sort()).toEqual(['cardpay:completed', 'mobilemoney:completed', 'walletpay:completed']);

    const events = readFileSync(LOG, 'utf8').split('\n').filter((l) => l.startsWith('{')).map((l) => JSON.parse(l) as { event: { type: string } });
    const types = events.map((e) => e.event.type).sort();
    expect(types).toEqual(['payment.completed', 'payment.completed', 'payment.completed', 'payment.refunded']);
  }, 120_000);
});
