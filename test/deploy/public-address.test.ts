import { readFileSync } from 'node:fs';
import { describe, expect, it } from '@jest/globals';
import { baseEnv, databaseForProcesses, freePort, logWithLine, startProcess } from '../support/processes.js';

// What a production api process tells its operator about how it is reached: a warning when the address
// it gives providers (PUBLIC_BASE_URL) is on this machine only, or not https.

const db = databaseForProcesses();

const WARNING = 'PUBLIC_BASE_URL is a loopback address';
const NOT_HTTPS = 'PUBLIC_BASE_URL is not https';

const METRICS_OPEN = 'METRICS_TOKEN is unset: /metrics answers anyone';
const SANDBOX_ON = 'SANDBOX is on with NODE_ENV=production';

async function productionApi(publicBaseUrl: (port: number) => string, env: Record<string, string> = {}) {
  const port = await freePort();
  return startProcess('api', baseEnv(db.url, publicBaseUrl(port), { NODE_ENV: 'production', SANDBOX: 'false', HOST: '127.0.0.1', PORT: String(port), ...env }));
}

describe('a production api process', () => {
  it('warns when PUBLIC_BASE_URL is a loopback address', async () => {
    const api = await productionApi((port) => `http://127.0.0.1:${port}`);
    expect(await logWithLine(api.logFile, WARNING)).toContain(WARNING);
    expect((await fetch(`${api.url}/healthz`)).status).toBe(200); // a warning, not a refusal to start
  });

  it('warns when PUBLIC_BASE_URL is not https (the providers register only https webhook URLs)', async () => {
    const api = await productionApi(() => 'http://payments.example.com');
    expect(await logWithLine(api.logFile, NOT_HTTPS)).toContain(NOT_HTTPS);
  });

  it('warns when METRICS_TOKEN is unset (compose publishes the api port; /metrics is then open to whoever reaches it)', async () => {
    const api = await productionApi(() => 'https://payments.example.com');
    expect(await logWithLine(api.logFile, METRICS_OPEN)).toContain(METRICS_OPEN);
    expect((await fetch(`${api.url}/metrics`)).status).toBe(200); // a warning, not a refusal to start
  });

  it('warns, at warn level, when SANDBOX is on: a leftover SANDBOX=true sends live credentials to the simulators, which complete payments with no money moved', async () => {
    const api = await productionApi(() => 'https://payments.example.com', { SANDBOX: 'true', METRICS_TOKEN: 'a-token-of-16-chars-or-more' });
    const lines = (await logWithLine(api.logFile, SANDBOX_ON)).split('\n').filter((line) => line.includes(SANDBOX_ON));
    expect(lines).toHaveLength(1);
    expect(JSON.parse(lines[0]!)).toMatchObject({ level: 40, msg: expect.stringContaining('no money moved') });
    expect((await fetch(`${api.url}/healthz`)).status).toBe(200); // allowed (decisions.md): a warning, not a refusal to start
  });

  it('says nothing of the kind with a public https address, METRICS_TOKEN set and the sandbox off', async () => {
    const api = await productionApi(() => 'https://payments.example.com', { METRICS_TOKEN: 'a-token-of-16-chars-or-more' });
    const log = readFileSync(api.logFile, 'utf8');
    expect(log).not.toContain(WARNING);
    expect(log).not.toContain(NOT_HTTPS);
    expect(log).not.toContain(METRICS_OPEN);
    expect(log).not.toContain(SANDBOX_ON);
  });
});
