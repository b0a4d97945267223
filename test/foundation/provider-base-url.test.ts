import { describe, expect, it } from '@jest/globals';
import { ConfigError, loadConfig } from '../../server/config/config.js';
import { baseEnv, databaseForProcesses, logWithLine, runCli, startProcess } from '../support/processes.js';
import { TEST_ENCRYPTION_KEY } from '../support/test-key.js';

// CARDPAY_BASE_URL, WALLETPAY_BASE_URL, MOBILEMONEY_BASE_URL send every call of their provider, live and
// sandbox credentials alike, to another address: never over plain http in production, and never silently.

/** A database nobody listens on: a process that got past its configuration fails at once. */
const NOWHERE = 'postgres://postgres@127.0.0.1:1/none';
const PRODUCTION = { NODE_ENV: 'production', ENCRYPTION_KEY: TEST_ENCRYPTION_KEY, DATABASE_URL: NOWHERE };

const db = databaseForProcesses();

describe('a provider base URL override', () => {
  it('must be https with NODE_ENV=production: an http one stops the boot (exit 2) naming the variable', async () => {
    for (const name of ['CARDPAY_BASE_URL', 'WALLETPAY_BASE_URL', 'MOBILEMONEY_BASE_URL']) {
      expect(() => loadConfig({ ...PRODUCTION, [name]: 'http://proxy.internal:8080' })).toThrow(ConfigError);
      expect(() => loadConfig({ ...PRODUCTION, [name]: 'http://proxy.internal:8080' })).toThrow(`${name} must be an https URL when NODE_ENV=production`);
      expect(() => loadConfig({ ...PRODUCTION, [name]: 'https://proxy.internal:8443' })).not.toThrow();
      // Development and tests point them at local stand-ins.
      expect(() => loadConfig({ NODE_ENV: 'development', [name]: 'http://127.0.0.1:4010' })).not.toThrow();
    }
    const run = await runCli('server/main.ts', [], { ...PRODUCTION, WALLETPAY_BASE_URL: 'http://relay:s3cret-pw@proxy.internal:8080/paypal' });
    expect(run.code).toBe(2);
    expect(run.stderr.trim()).toBe('WALLETPAY_BASE_URL must be an https URL when NODE_ENV=production: every walletpay call, with its credentials, goes there instead of the provider');
    expect(run.stdout + run.stderr).not.toContain('s3cret-pw');
  }, 60_000);

  it('is logged as a warning at every boot, naming the variable and the origin calls go to, never a password in the URL', async () => {
    const api = await startProcess('api', baseEnv(db.url, 'http://127.0.0.1:1', { CARDPAY_BASE_URL: 'https://relay:s3cret-pw@stripe-proxy.example.com:8443/v1/' }));
    const said = 'CARDPAY_BASE_URL is set: every cardpay call, live and sandbox credentials alike, goes to https://stripe-proxy.example.com:8443';
    const log = await logWithLine(api.logFile, said);
    const lines = log.split('\n').filter((line) => line.includes('_BASE_URL is set'));
    expect(lines).toHaveLength(1);
    expect(JSON.parse(lines[0]!)).toMatchObject({ level: 40, variable: 'CARDPAY_BASE_URL', origin: 'https://stripe-proxy.example.com:8443' });
    expect(lines[0]).toContain(said);
    expect(log).not.toContain('s3cret-pw');
    expect((await fetch(`${api.url}/healthz`)).status).toBe(200); // a warning, not a refusal to start
  }, 120_000);
});
