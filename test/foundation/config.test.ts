import { X509Certificate, generateKeyPairSync, randomBytes } from 'node:crypto';
import { mkdtempSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { describe, expect, it } from '@jest/globals';
import { ConfigError, MAX_REQUEST_TIMEOUT_MS, MAX_SHUTDOWN_TIMEOUT_MS, MAX_TIMER_MS, loadConfig } from '../../server/config/config.js';
import { isAllowedSource } from '../../server/providers/mobilemoney/callback.js';
import { runCli } from '../support/processes.js';
import { selfSignedCertificate } from '../../server/sandbox/certificates.js';

// Reading the environment at boot: what an operator's values turn into, and what stops the process.

/** A database nobody listens on: a process that got past its configuration fails at once, starting no embedded one. */
const NOWHERE = 'postgres://postgres@127.0.0.1:1/none';

describe('configuration', () => {
  it('treats a variable set to the empty string as unset', () => {
    // `METRICS_TOKEN=` in a .env file, or compose's ${METRICS_TOKEN:-}: no token, not a too-short one.
    expect(loadConfig({ METRICS_TOKEN: '' }).metricsToken).toBeUndefined();
    // The same for every variable: the default, never "" coerced to 0 or refused.
    const config = loadConfig({ PORT: '', SHUTDOWN_TIMEOUT_MS: '', LOG_LEVEL: '', DECRYPTION_KEYS: '', HOST: '' });
    const defaults = loadConfig({});
    expect(config.port).toBe(defaults.port);
    expect(config.shutdownTimeoutMs).toBe(defaults.shutdownTimeoutMs);
    expect(config.logLevel).toBe(defaults.logLevel);
    expect(config.decryptionKeys).toEqual([]);
    expect(config.host).toBe(defaults.host);
  });

  it("defaults to production's safe settings under NODE_ENV=production, and to the documented schedules everywhere", () => {
    const production = loadConfig({ NODE_ENV: 'production', DATABASE_URL: NOWHERE, ENCRYPTION_KEY: randomBytes(32).toString('base64') });
    // decisions.md: no simulators and no private webhook addresses unless the operator asks for them.
    expect({ sandbox: production.sandbox, webhookAllowPrivateUrls: production.webhookAllowPrivateUrls }).toEqual({ sandbox: false, webhookAllowPrivateUrls: false });
    const development = loadConfig({ NODE_ENV: 'development' });
    expect({ sandbox: development.sandbox, webhookAllowPrivateUrls: development.webhookAllowPrivateUrls }).toEqual({ sandbox: true, webhookAllowPrivateUrls: true });
    for (const config of [production, development]) {
      // decisions.md: retries after 30 s, 2 min, 10 min, 30 min and 2 h, each attempt waiting 30 s; interface.md: reconciliation every 15 minutes.
      expect(config.webhookRetryScheduleMs).toEqual([30_000, 120_000, 600_000, 1_800_000, 7_200_000]);
      expect(config.webhookTimeoutMs).toBe(30_000);
      expect(config.mobilemoneyReconcileIntervalMs).toBe(900_000);
    }
  });

  it("turns the simulators' test controls off under NODE_ENV=production unless SANDBOX_CONTROLS says otherwise, and refuses a value that is no boolean", async () => {
    const prod = { NODE_ENV: 'production', DATABASE_URL: NOWHERE, ENCRYPTION_KEY: randomBytes(32).toString('base64') };
    // A demo deployment (SANDBOX=true) keeps its simulators; their controls, open to anyone who reaches the port, are off.
    expect(loadConfig({ ...prod, SANDBOX: 'true' })).toMatchObject({ sandbox: true, sandboxControls: false });
    expect(loadConfig({ ...prod, SANDBOX: 'true', SANDBOX_CONTROLS: 'true' })).toMatchObject({ sandbox: true, sandboxControls: true });
    for (const env of ['development', 'test']) expect(loadConfig({ NODE_ENV: env }).sandboxControls).toBe(true);
    expect(loadConfig({ NODE_ENV: 'test', SANDBOX_CONTROLS: 'false' }).sandboxControls).toBe(false);
    expect(loadConfig({ NODE_ENV: 'test', SANDBOX_CONTROLS: '' }).sandboxControls).toBe(true);
    expect(() => loadConfig({ SANDBOX_CONTROLS: 'on' })).toThrow(ConfigError);
    expect(() => loadConfig({ SANDBOX_CONTROLS: 'on' })).toThrow('SANDBOX_CONTROLS');
    const run = await runCli('server/main.ts', [], { SANDBOX_CONTROLS: 'maybe', NODE_ENV: 'test', DATABASE_URL: NOWHERE });
    expect(run.code).toBe(2);
    expect(run.stderr.trim()).toMatch(/^invalid configuration: SANDBOX_CONTROLS: /);
  }, 30_000);

  it('refuses a MOBILEMONEY_CALLBACK_ALLOWLIST entry that is not an address or CIDR, naming it', () => {
    const allowlist = (value: string) => loadConfig({ MOBILEMONEY_CALLBACK_ALLOWLIST: value }).mobilemoneyCallbackAllowlist;
    // Each of these used to boot and match nothing: every live callback refused.
    for (const [value, bad] of [
      ['196.201.214.200 196.201.214.206', '196.201.214.200 196.201.214.206'],
      ['196.201.214.200;196.201.214.206', '196.201.214.200;196.201.214.206'],
      ['196.201.214.200, 196.201.213.0/24x', '196.201.213.0/24x'],
      ['10.0.0.0/33', '10.0.0.0/33'],
      ['196.201.214', '196.201.214'],
      ['callbacks.example.com', 'callbacks.example.com'],
    ]) {
      expect(() => allowlist(value!)).toThrow(ConfigError);
      expect(() => allowlist(value!)).toThrow(`"${bad}"`);
    }
    expect(() => allowlist(' , ')).toThrow(ConfigError);
    // What is accepted is what the callback check matches.
    const accepted = allowlist(' 196.201.214.200 , 196.201.212.0/24,2001:db8::/32,::ffff:10.1.0.0/112 ');
    expect(accepted).toEqual(['196.201.214.200', '196.201.212.0/24', '2001:db8::/32', '::ffff:10.1.0.0/112']);
    for (const ip of ['196.201.214.200', '196.201.212.9', '2001:db8::1', '10.1.2.3']) expect(isAllowedSource(ip, accepted, false)).toBe(true);
    expect(isAllowedSource('196.201.213.1', accepted, false)).toBe(false);
    // Unset (or empty): the operator's published addresses.
    expect(loadConfig({ MOBILEMONEY_CALLBACK_ALLOWLIST: '' }).mobilemoneyCallbackAllowlist).toEqual(loadConfig({}).mobilemoneyCallbackAllowlist);
    expect(loadConfig({}).mobilemoneyCallbackAllowlist.length).toBeGreaterThan(0);
  });

  it('takes WEBHOOK_DNS_SERVERS as addresses with optional ports, and refuses anything else naming the entry', () => {
    const servers = (value: string) => loadConfig({ WEBHOOK_DNS_SERVERS: value }).webhookDnsServers;
    expect(servers('9.9.9.9, 10.0.0.2:5353,2620:fe::fe,[2620:fe::9]:53')).toEqual(['9.9.9.9', '10.0.0.2:5353', '2620:fe::fe', '[2620:fe::9]:53']);
    for (const bad of ['dns.example.com', '10.0.0.2:0', '10.0.0.2:70000', '[10.0.0.2]:53', '10.0.0.2 10.0.0.3', '10.0.0']) {
      expect(() => servers(bad)).toThrow(ConfigError);
      expect(() => servers(bad)).toThrow(`"${bad}"`);
    }
    expect(() => servers(',')).toThrow('WEBHOOK_DNS_SERVERS lists no server');
    // Unset (or empty): the system's nameservers.
    expect(loadConfig({ WEBHOOK_DNS_SERVERS: '' }).webhookDnsServers).toBeUndefined();
  });

  it('refuses an interval, timeout or retention of 0, or a value that is no duration, naming the variable', () => {
    // DELIVERY_SWEEP_INTERVAL=0 had an idle worker query the database ~550 times a second; an every(0)
    // turned the shared repeating jobs into one-shot jobs.
    const durations = ['DATABASE_ACQUIRE_TIMEOUT', 'IDEMPOTENCY_KEY_PRUNE_INTERVAL', 'DELIVERY_SWEEP_INTERVAL', 'EVENT_RETENTION', 'EVENT_PRUNE_INTERVAL',
      'PAYMENT_COUNT_FOLD_INTERVAL', 'STATUS_SYNC_POLL_INTERVAL', 'MOBILEMONEY_RECONCILE_INTERVAL', 'RATE_LIMIT_PRUNE_INTERVAL'];
    for (const name of durations) {
      for (const zero of ['0', '0s', '0.1ms']) {
        expect(() => loadConfig({ [name]: zero })).toThrow(ConfigError);
        expect(() => loadConfig({ [name]: zero })).toThrow(`${name} must be longer than 0`);
      }
      expect(() => loadConfig({ [name]: '30days' })).toThrow(ConfigError);
      expect(() => loadConfig({ [name]: '30days' })).toThrow(`${name}: "30days" is not a duration`);
    }
    // The lease and the key retention are held above PROVIDER_TIMEOUT_MS and the lease: 0 is refused by name as well.
    expect(() => loadConfig({ IDEMPOTENCY_LEASE: '0' })).toThrow(/IDEMPOTENCY_LEASE must be longer/);
    expect(() => loadConfig({ IDEMPOTENCY_KEY_RETENTION: '0' })).toThrow(/IDEMPOTENCY_KEY_RETENTION must be longer/);
    // The delay before the listener closes is part of the stop's budget.
    expect(loadConfig({}).shutdownDelayMs).toBe(0);
    expect(() => loadConfig({ SHUTDOWN_DELAY_MS: '30000' })).toThrow('SHUTDOWN_DELAY_MS must be shorter than SHUTDOWN_TIMEOUT_MS');
    // What the stop leaves the requests under way must cover one provider call: at the defaults 30 s against 15 s.
    const budget = 'SHUTDOWN_TIMEOUT_MS less SHUTDOWN_DELAY_MS (what a stop leaves the requests under way) must be longer than PROVIDER_TIMEOUT_MS';
    for (const env of [
      { SHUTDOWN_TIMEOUT_MS: '10000' },
      { SHUTDOWN_TIMEOUT_MS: '15000' },
      { SHUTDOWN_DELAY_MS: '20000' },
      { PROVIDER_TIMEOUT_MS: '30000', IDEMPOTENCY_LEASE: '2m' },
      { SHUTDOWN_TIMEOUT_MS: '20000', SHUTDOWN_DELAY_MS: '5000', PROVIDER_TIMEOUT_MS: '15000' },
    ]) {
      expect(() => loadConfig(env)).toThrow(ConfigError);
      expect(() => loadConfig(env)).toThrow(budget);
    }
    expect(loadConfig({})).toMatchObject({ shutdownTimeoutMs: 30_000, shutdownDelayMs: 0, providerTimeoutMs: 15_000 });
    expect(loadConfig({ SHUTDOWN_TIMEOUT_MS: '20001', SHUTDOWN_DELAY_MS: '5000' }).shutdownDelayMs).toBe(5_000);
    expect(loadConfig({ SHUTDOWN_TIMEOUT_MS: '2000', PROVIDER_TIMEOUT_MS: '1999' }).shutdownTimeoutMs).toBe(2_000);
    expect(() => loadConfig({ IDEMPOTENCY_LEASE: '1 minute' })).toThrow('IDEMPOTENCY_LEASE: "1 minute" is not a duration');
    for (const name of ['SHUTDOWN_TIMEOUT_MS', 'WEBHOOK_TIMEOUT_MS', 'PROVIDER_TIMEOUT_MS']) {
      expect(() => loadConfig({ [name]: '0' })).toThrow(ConfigError);
      expect(() => loadConfig({ [name]: '0' })).toThrow(name);
    }
    // A schedule is a finite list of delays: 0 is the next try at once; a bad entry names the variable.
    expect(loadConfig({ WEBHOOK_RETRY_SCHEDULE: '0,30s', STATUS_SYNC_SCHEDULE: '0,1m' })).toMatchObject({ webhookRetryScheduleMs: [0, 30_000], statusSyncScheduleMs: [0, 60_000] });
    for (const name of ['WEBHOOK_RETRY_SCHEDULE', 'STATUS_SYNC_SCHEDULE']) {
      expect(() => loadConfig({ [name]: '30s,2min' })).toThrow(ConfigError);
      expect(() => loadConfig({ [name]: '30s,2min' })).toThrow(`${name}: not a duration: "2min"`);
      // An empty entry is no schedule (unset or "" is the default): "," had webhooks die after one attempt and pending payments never re-checked.
      for (const empty of [',', '30s,,2m', '30s,']) {
        expect(() => loadConfig({ [name]: empty })).toThrow(ConfigError);
        expect(() => loadConfig({ [name]: empty })).toThrow(`${name}: "${empty}" has an empty entry`);
      }
    }
    // The simulators' delays may be 0 (none).
    expect(loadConfig({ SANDBOX_CALLBACK_DELAY_MS: '0', SANDBOX_LATENCY_MS: '0' })).toMatchObject({ sandboxCallbackDelayMs: 0, sandboxLatencyMs: 0 });
    // ...and at most 2 minutes: a huge SANDBOX_CALLBACK_DELAY_MS made the simulators throw (Invalid Date) at the first callback.
    for (const name of ['SANDBOX_CALLBACK_DELAY_MS', 'SANDBOX_LATENCY_MS']) {
      for (const over of ['120001', '1e16']) {
        expect(() => loadConfig({ [name]: over })).toThrow(ConfigError);
        expect(() => loadConfig({ [name]: over })).toThrow(`${name}: must be at most 120000 (2 minutes)`);
      }
    }
    expect(loadConfig({ SANDBOX_CALLBACK_DELAY_MS: '120000', SANDBOX_LATENCY_MS: '120000' })).toMatchObject({ sandboxCallbackDelayMs: 120_000, sandboxLatencyMs: 120_000 });
  });

  it('refuses a timeout or interval that would overflow its timer (or is far past any use), naming the variable', () => {
    // Past 2^31-1 ms Node fires a timer after 1 ms: WEBHOOK_TIMEOUT_MS=3000000000 failed every webhook attempt at once,
    // PROVIDER_TIMEOUT_MS every provider call, SHUTDOWN_TIMEOUT_MS exited every stop at once.
    const overflow = String(MAX_TIMER_MS + 1);
    const bounds: [string, number, string][] = [
      ['WEBHOOK_TIMEOUT_MS', MAX_REQUEST_TIMEOUT_MS, 'webhookTimeoutMs'],
      ['PROVIDER_TIMEOUT_MS', MAX_REQUEST_TIMEOUT_MS, 'providerTimeoutMs'],
      ['SHUTDOWN_TIMEOUT_MS', MAX_SHUTDOWN_TIMEOUT_MS, 'shutdownTimeoutMs'],
    ];
    for (const [name, max, field] of bounds) {
      expect(max).toBeLessThan(MAX_TIMER_MS);
      for (const value of [overflow, '3000000000', '1e10', String(max + 1)]) {
        expect(() => loadConfig({ [name]: value })).toThrow(ConfigError);
        expect(() => loadConfig({ [name]: value })).toThrow(`${name}: must be at most ${max}`);
      }
      // The bound itself is taken (with a lease and a stop long enough for a 5-minute provider timeout, too).
      const env = { SHUTDOWN_TIMEOUT_MS: '310000', [name]: String(max), IDEMPOTENCY_LEASE: '11m' };
      expect(loadConfig(env)).toMatchObject({ [field]: max });
    }
    const durations: [string, string, string, string][] = [
      ['DATABASE_ACQUIRE_TIMEOUT', '5m', '301s', 'at most 5m'],
      ['IDEMPOTENCY_LEASE', '1h', '61m', 'at most 1h'],
      ['DELIVERY_SWEEP_INTERVAL', '24h', '25d', 'at most 24h'],
    ];
    for (const [name, max, over, message] of durations) {
      expect(() => loadConfig({ [name]: over })).toThrow(ConfigError);
      expect(() => loadConfig({ [name]: over })).toThrow(`${name} must be ${message}`);
      expect(() => loadConfig({ [name]: max })).not.toThrow();
    }
    // Retention periods are no timers: a month is fine.
    expect(loadConfig({ EVENT_RETENTION: '30d', PROVIDER_EVENT_RETENTION: '60d' }).providerEventRetentionMs).toBe(60 * 86_400_000);
  });

  it('stops at boot with exit code 2 naming WEBHOOK_TIMEOUT_MS when it would overflow its timer', async () => {
    const run = await runCli('server/main.ts', [], { WEBHOOK_TIMEOUT_MS: '3000000000', NODE_ENV: 'test', DATABASE_URL: NOWHERE });
    expect(run.code).toBe(2);
    expect(run.stderr.trim()).toBe('invalid configuration: WEBHOOK_TIMEOUT_MS: must be at most 300000 (5 minutes): it is used in a timer');
  }, 30_000);

  it('stops the service with exit code 2 and the variable named, as for any other configuration error', async () => {
    const run = await runCli('server/main.ts', [], { EVENT_RETENTION: '30days', NODE_ENV: 'test', DATABASE_URL: NOWHERE });
    expect([run.code, run.stderr.trim()]).toEqual([2, 'EVENT_RETENTION: "30days" is not a duration (a number with a unit: 250ms, 30s, 5m, 1h, 30d)']);
  }, 30_000);

  it('refuses a production process without DATABASE_URL, before starting any database: the embedded one is for development', async () => {
    const key = randomBytes(32).toString('base64');
    expect(() => loadConfig({ NODE_ENV: 'production', ENCRYPTION_KEY: key })).toThrow(
      'DATABASE_URL is required when NODE_ENV=production (the embedded PostgreSQL is for development and tests)',
    );
    expect(loadConfig({ NODE_ENV: 'production', ENCRYPTION_KEY: key, DATABASE_URL: NOWHERE }).databaseUrl).toBe(NOWHERE);
    // Was: the service started an embedded cluster in ./.data (or failed on its directory, naming nothing).
    const dataDir = mkdtempSync(path.join(os.tmpdir(), 'prod-no-db-'));
    const service = await runCli('server/main.ts', [], { NODE_ENV: 'production', ENCRYPTION_KEY: key, DATA_DIR: dataDir, DATABASE_URL: '' });
    expect([service.code, service.stderr.trim()]).toEqual([2, 'DATABASE_URL is required when NODE_ENV=production (the embedded PostgreSQL is for development and tests)']);
  }, 30_000);

  it("refuses a production api or worker with SANDBOX on and no PUBLIC_BASE_URL at boot (exit code 2, naming it): each role's default differs, and the simulators' callbacks a worker sends to the address the api registered would be refused", async () => {
    const key = randomBytes(32).toString('base64');
    const production = { NODE_ENV: 'production', ENCRYPTION_KEY: key, DATABASE_URL: NOWHERE, SANDBOX: 'true' };
    for (const role of ['api', 'worker']) {
      expect(() => loadConfig({ ...production, ROLE: role })).toThrow(ConfigError);
      expect(() => loadConfig({ ...production, ROLE: role })).toThrow(`PUBLIC_BASE_URL is required when NODE_ENV=production with SANDBOX on and ROLE=${role}`);
      // Named, both roles agree on the simulators' own origin.
      expect(loadConfig({ ...production, ROLE: role, PUBLIC_BASE_URL: 'https://pay.example.com' }).publicBaseUrl).toBe('https://pay.example.com');
      // Not asked for where no simulator calls back, or outside production (private callback addresses allowed).
      expect(loadConfig({ ...production, ROLE: role, SANDBOX: 'false' }).sandbox).toBe(false);
      expect(loadConfig({ NODE_ENV: 'development', SANDBOX: 'true', ROLE: role }).sandbox).toBe(true);
    }
    // One process serving both roles calls back its own listening address.
    expect(loadConfig({ ...production, ROLE: 'all' }).sandbox).toBe(true);
    const run = await runCli('server/main.ts', [], { ...production, ROLE: 'worker', PUBLIC_BASE_URL: '' });
    expect(run.code).toBe(2);
    expect(run.stderr.trim()).toMatch(/^PUBLIC_BASE_URL is required when NODE_ENV=production with SANDBOX on and ROLE=worker: /);
  }, 30_000);

  it('refuses a NODE_ENV other than development, test or production at boot (exit code 2), naming it and the values it takes', async () => {
    // Each of these used to run as development: simulators on, private webhook URLs allowed, no rate limits.
    for (const bad of ['Production', 'prod', 'PRODUCTION', 'staging', 'production ']) {
      expect(() => loadConfig({ NODE_ENV: bad })).toThrow(ConfigError);
      expect(() => loadConfig({ NODE_ENV: bad })).toThrow('NODE_ENV: must be development, test, production (unset: development)');
    }
    for (const good of ['development', 'test']) expect(loadConfig({ NODE_ENV: good })).toMatchObject({ env: good, production: false });
    expect(loadConfig({ NODE_ENV: '' }).env).toBe('development');
    expect(loadConfig({ NODE_ENV: 'production', ENCRYPTION_KEY: randomBytes(32).toString('base64'), DATABASE_URL: NOWHERE }).production).toBe(true);
    const run = await runCli('server/main.ts', [], { NODE_ENV: 'Production', DATABASE_URL: NOWHERE });
    expect([run.code, run.stderr.trim()]).toEqual([2, 'invalid configuration: NODE_ENV: must be development, test, production (unset: development); any other value would run as development']);
  }, 30_000);

  it('refuses a PUBLIC_BASE_URL, provider override or DATABASE_URL without its scheme at boot (exit code 2), naming it: `pay.example.com:443` parsed as a URL of scheme `pay.example.com:` and callbacks were registered at `pay.example.com:443/v1/webhooks/cardpay`', async () => {
    const base = { NODE_ENV: 'test', DATABASE_URL: NOWHERE };
    for (const bad of ['pay.example.com:443', 'localhost:3000', 'ftp://pay.example.com', 'mailto:ops@example.com']) {
      expect(() => loadConfig({ ...base, PUBLIC_BASE_URL: bad })).toThrow(ConfigError);
      expect(() => loadConfig({ ...base, PUBLIC_BASE_URL: bad })).toThrow('PUBLIC_BASE_URL: must be a URL starting with http:// or https://, with a host');
      expect(() => loadConfig({ ...base, CARDPAY_BASE_URL: bad })).toThrow('CARDPAY_BASE_URL: must be a URL starting with http:// or https://, with a host');
    }
    expect(loadConfig({ ...base, PUBLIC_BASE_URL: 'https://pay.example.com' }).publicBaseUrl).toBe('https://pay.example.com');
    expect(loadConfig({ ...base, PUBLIC_BASE_URL: 'http://localhost:3000/' }).publicBaseUrl).toBe('http://localhost:3000');
    expect(loadConfig({ ...base, WALLETPAY_BASE_URL: 'http://127.0.0.1:4010' }).providerBaseUrls.walletpay).toBe('http://127.0.0.1:4010');
    expect(() => loadConfig({ DATABASE_URL: 'db.internal:5432/payments' })).toThrow('DATABASE_URL: must be a URL starting with postgres:// or postgresql://');
    expect(loadConfig({ DATABASE_URL: 'postgresql://app@db.internal/payments' }).databaseUrl).toBe('postgresql://app@db.internal/payments');
    // A Unix socket, as README says to write it (node-postgres' `socket:` form is refused).
    expect(loadConfig({ DATABASE_URL: 'postgresql:///payments?host=/var/run/postgresql' }).databaseUrl).toBe('postgresql:///payments?host=/var/run/postgresql');
    const run = await runCli('server/main.ts', [], { ...base, PUBLIC_BASE_URL: 'pay.example.com:443' });
    expect([run.code, run.stderr.trim()]).toEqual([2, 'invalid configuration: PUBLIC_BASE_URL: must be a URL starting with http:// or https://, with a host (https://pay.example.com)']);
  }, 30_000);

  it('refuses a DATABASE_URL whose password holds a bare %, naming the variable (it failed at connect with "URI malformed")', () => {
    expect(() => loadConfig({ DATABASE_URL: 'postgres://app:p%zz@db.internal/payments' })).toThrow(
      'DATABASE_URL: the user, password or database name holds a % that is not percent-encoding (write % as %25)',
    );
    expect(loadConfig({ DATABASE_URL: 'postgres://app:p%25zz@db.internal/payments' }).databaseUrl).toBe('postgres://app:p%25zz@db.internal/payments');
  });

  it('refuses an encryption key that is not 32 bytes in base64 before connecting anywhere: migrate, the admin CLI and the service alike', async () => {
    const good = randomBytes(32).toString('base64');
    expect(loadConfig({ ENCRYPTION_KEY: ` ${good}\n`, DECRYPTION_KEYS: `${randomBytes(32).toString('base64')}, ${good}` }).decryptionKeys).toHaveLength(2);
    // base64url, as SecretBox has always read it: a deployment's existing key keeps working.
    expect(loadConfig({ ENCRYPTION_KEY: Buffer.alloc(32, 0xfb).toString('base64url') }).encryptionKey).toContain('-');
    // `openssl rand -hex 32` (a common slip), a truncated key, a 16-byte key.
    for (const bad of [randomBytes(32).toString('hex'), good.slice(0, 40), randomBytes(16).toString('base64')]) {
      expect(() => loadConfig({ ENCRYPTION_KEY: bad })).toThrow('ENCRYPTION_KEY must be the base64 encoding of exactly 32 bytes (openssl rand -base64 32)');
      expect(() => loadConfig({ ENCRYPTION_KEY: good, DECRYPTION_KEYS: `${good},${bad}` })).toThrow('each of DECRYPTION_KEYS must be the base64 encoding of exactly 32 bytes');
    }
    // Was: migrate succeeded, and the service connected, migrated, then exited 1 ("failed to start").
    const hex = randomBytes(32).toString('hex');
    const message = 'ENCRYPTION_KEY must be the base64 encoding of exactly 32 bytes (openssl rand -base64 32)';
    const service = await runCli('server/main.ts', [], { ENCRYPTION_KEY: hex, NODE_ENV: 'test', DATABASE_URL: NOWHERE });
    expect([service.code, service.stderr.trim()]).toEqual([2, message]);
    // migrate's usage errors exit 64 with its help after the message.
    const migrate = await runCli('server/migrate.ts', [], { ENCRYPTION_KEY: hex, NODE_ENV: 'test', DATABASE_URL: NOWHERE });
    expect([migrate.code, migrate.stderr.split('\n')[0]]).toEqual([64, message]);
    // The admin CLI too (it said "admin failed: …" and exited 1, as for a bug).
    const admin = await runCli('server/admin/cli.ts', ['key', 'list', '--merchant', '00000000-0000-4000-8000-000000000000'], { ENCRYPTION_KEY: hex, NODE_ENV: 'test', DATABASE_URL: NOWHERE });
    expect([admin.code, admin.stderr.trim()]).toEqual([64, message]);
  }, 60_000);

  describe('mobilemoney operator certificates, read at boot', () => {
    const dir = mkdtempSync(path.join(os.tmpdir(), 'mm-config-cert-'));
    const file = (name: string, content: string | Buffer) => (writeFileSync(path.join(dir, name), content), path.join(dir, name));
    const { privateKey, publicKey } = generateKeyPairSync('rsa', { modulusLength: 2048, privateKeyEncoding: { type: 'pkcs8', format: 'pem' }, publicKeyEncoding: { type: 'spki', format: 'pem' } });
    const pem = selfSignedCertificate(privateKey, 'apigw.example.test', 'Operator');
    const certPem = file('ProductionCertificate.pem', pem);
    const certDer = file('ProductionCertificate.cer', new X509Certificate(pem).raw);
    const publicKeyPem = file('operator-public.pem', publicKey);
    const garbage = file('not-a-cert.cer', '<html>404 Not Found</html>');
    const missing = path.join(dir, 'no-such-file.cer');

    it('accepts what each one is used as: PEM or DER certificates for the initiator password, PEM certificate or key for callback signatures', () => {
      const config = loadConfig({ MOBILEMONEY_SANDBOX_CERT_PATH: certPem, MOBILEMONEY_LIVE_CERT_PATH: certDer, MOBILEMONEY_CERT_PATH: publicKeyPem });
      expect(config.mobilemoneySecurityCertPaths).toEqual({ sandbox: certPem, live: certDer });
      expect(config.mobilemoneyCertPath).toBe(publicKeyPem);
      expect(loadConfig({ MOBILEMONEY_CERT_PATH: certPem }).mobilemoneyCertPath).toBe(certPem);
    });

    it('refuses a path that cannot be read, or a file that is not a certificate, naming the variable', () => {
      // Each of these booted and said ready; the first live reversal or status query failed, or signed callbacks were answered 500.
      for (const name of ['MOBILEMONEY_CERT_PATH', 'MOBILEMONEY_SANDBOX_CERT_PATH', 'MOBILEMONEY_LIVE_CERT_PATH']) {
        expect(() => loadConfig({ [name]: missing })).toThrow(ConfigError);
        expect(() => loadConfig({ [name]: missing })).toThrow(`${name}: ${missing} cannot be read (ENOENT)`);
        expect(() => loadConfig({ [name]: garbage })).toThrow(ConfigError);
        expect(() => loadConfig({ [name]: garbage })).toThrow(new RegExp(`^${name}: .*not-a-cert.cer is not`));
        expect(() => loadConfig({ [name]: dir })).toThrow(`${name}: ${dir} cannot be read (EISDIR)`);
      }
      // The callback signature check reads the file as PEM: a DER certificate there would refuse every signed callback.
      expect(() => loadConfig({ MOBILEMONEY_CERT_PATH: certDer })).toThrow('MOBILEMONEY_CERT_PATH: ' + certDer + ' is not a PEM certificate or public key');
    });

    it('stops the service at boot with exit code 2, naming the variable', async () => {
      const run = await runCli('server/main.ts', [], { MOBILEMONEY_LIVE_CERT_PATH: missing, NODE_ENV: 'test', DATABASE_URL: NOWHERE });
      expect([run.code, run.stderr.trim()]).toEqual([2, `MOBILEMONEY_LIVE_CERT_PATH: ${missing} cannot be read (ENOENT)`]);
    }, 30_000);
  });
});
