import { execFileSync } from 'node:child_process';
import { mkdtempSync, readFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { describe, expect, it } from '@jest/globals';
import { parse as parseYaml } from 'yaml';
import { loadConfig } from '../../server/config/config.js';
import { parseDurationMs } from '../../server/config/duration.js';

/**
 * compose.yaml as `docker compose up` reads it (README, Production), with only the two variables the
 * README tells the operator to set: every process it starts must accept its environment (the migrate
 * service once exited 64 on `METRICS_TOKEN: ${METRICS_TOKEN:-}`), and Docker must not SIGKILL a
 * process still within its own graceful-stop budget.
 */

const REPO = path.resolve(new URL('../..', import.meta.url).pathname);
const operatorEnv: Record<string, string> = {
  ENCRYPTION_KEY: Buffer.alloc(32, 7).toString('base64'),
  PUBLIC_BASE_URL: 'https://pay.example.com',
};

/** Compose's interpolation: ${VAR}, ${VAR:-default}, ${VAR-default}, ${VAR:?error}, ${VAR?error}, $$. */
function interpolate(text: string, env: Record<string, string>): string {
  return text.replace(/\$\$|\$\{(\w+)(?:(:?)([-?])([^}]*))?\}/g, (match, name: string | undefined, colon: string, op: string, arg: string) => {
    if (match === '$$') return '$';
    const value = env[name!];
    const missing = colon ? !value : value === undefined;
    if (op === '-') return missing ? arg : value!;
    if (op === '?' && missing) throw new Error(`compose refuses to start: ${arg}`);
    return value ?? '';
  });
}

/** Interpolation applies to the parsed file's string values (so `KEY: ${VAR:-}` is the empty string, not null). */
function interpolateValues(node: unknown, env: Record<string, string>): unknown {
  if (typeof node === 'string') return interpolate(node, env);
  if (Array.isArray(node)) return node.map((item) => interpolateValues(item, env));
  if (node && typeof node === 'object') return Object.fromEntries(Object.entries(node).map(([k, v]) => [k, interpolateValues(v, env)]));
  return node;
}

/**
 * A service's container environment, the operator's `.env` holding `env`: its `env_file` (which must be
 * that `.env`) first, then `environment` over it, where a key without a value passes the operator's
 * variable on, or is left out (leaving the env_file's value, if any).
 */
function containerEnv(service: Service, env: Record<string, string>): Record<string, string> {
  const out: Record<string, string> = {};
  for (const entry of service.env_file ?? []) {
    const file = typeof entry === 'string' ? entry : entry.path;
    expect(path.normalize(file)).toBe('.env');
    Object.assign(out, env);
  }
  for (const [key, value] of Object.entries(service.environment)) {
    if (value === null) {
      if (env[key] !== undefined) out[key] = env[key];
    } else {
      out[key] = String(value);
    }
  }
  return out;
}

type Service = {
  environment: Record<string, string | number | null>;
  env_file?: (string | { path: string; required?: boolean })[];
  stop_grace_period?: string;
  command?: string[];
  ports?: string[];
  image?: string;
};
const composeText = readFileSync(path.join(REPO, 'compose.yaml'), 'utf8');

/** The service's definition as compose resolves it with the operator's variables `env`. */
function service(name: string, env: Record<string, string>): Service {
  const compose = interpolateValues(parseYaml(composeText, { merge: true }), env) as { services: Record<string, Service> };
  return compose.services[name]!;
}

describe('compose.yaml', () => {
  it.each(['migrate', 'api', 'worker'])('gives the %s service an environment the configuration accepts', (name) => {
    const config = loadConfig(containerEnv(service(name, operatorEnv), operatorEnv));
    expect(config.production).toBe(true);
    expect(config.publicBaseUrl).toBe(operatorEnv.PUBLIC_BASE_URL);
    expect(config.metricsToken).toBeUndefined();
    expect(config.decryptionKeys).toEqual([]);
  });

  it('passes METRICS_TOKEN on when the operator sets it', () => {
    const env = { ...operatorEnv, METRICS_TOKEN: 'a-token-of-16-chars-or-more' };
    expect(loadConfig(containerEnv(service('api', env), env)).metricsToken).toBe(env.METRICS_TOKEN);
  });

  it.each(['api', 'worker'])('passes every variable of README\'s configuration table set in .env on to the %s service', (name) => {
    const readme = readFileSync(path.join(REPO, 'README.md'), 'utf8');
    const table = readme.slice(readme.indexOf('\n## Configuration\n'), readme.indexOf('\n## Production\n'));
    const documented = [...new Set(table.split('\n').filter((line) => line.startsWith('| `')).flatMap((line) => [...line.split(' | ')[0]!.matchAll(/`([A-Z][A-Z0-9_]+)`/g)].map((m) => m[1]!)))];
    // The rows the operator most needs behind a balancer (README, Going live) are among them.
    expect(documented).toEqual(expect.arrayContaining(['TRUST_PROXY', 'MOBILEMONEY_CALLBACK_ALLOWLIST', 'MOBILEMONEY_CERT_PATH', 'RATE_LIMIT_PER_SECOND', 'CALLBACK_RATE_LIMIT_PER_MINUTE', 'WEBHOOK_RETRY_SCHEDULE', 'METRICS_TOKEN']));
    expect(documented.length).toBeGreaterThan(40);
    // A .env setting every one of them (a value per variable: only its arrival is checked here).
    const dotEnv: Record<string, string> = { ...operatorEnv, ...Object.fromEntries(documented.filter((v) => !(v in operatorEnv)).map((v) => [v, `value-of-${v}`])) };
    const received = containerEnv(service(name, dotEnv), dotEnv);
    // What compose itself decides for these containers: its database, production, the migrate service owning the schema, the role and its port.
    const composeOwns = ['NODE_ENV', 'DATABASE_URL', 'MIGRATE_ON_BOOT', 'ROLE', 'PORT', 'WORKER_PORT', 'HOST'];
    expect(documented.filter((v) => !composeOwns.includes(v) && received[v] !== dotEnv[v])).toEqual([]);
    for (const v of composeOwns) expect(received[v]).toBeDefined();
    // Unset in .env: compose's defaults stay (no variable appears empty or out of nowhere).
    const bare = containerEnv(service(name, operatorEnv), operatorEnv);
    expect(bare).toMatchObject({ NODE_ENV: 'production', MIGRATE_ON_BOOT: 'false', DATABASE_POOL_MAX: '10', LOG_LEVEL: 'info' });
    expect(Object.keys(bare).filter((k) => documented.includes(k) && bare[k] === '')).toEqual([]);
  });

  it.each(['api', 'worker'])('has the %s service listen on every interface of its container, SANDBOX=true in .env included (a published port reaches nothing bound to the container\'s loopback)', (name) => {
    for (const env of [operatorEnv, { ...operatorEnv, SANDBOX: 'true' }]) {
      expect(loadConfig(containerEnv(service(name, env), env)).host).toBe('0.0.0.0');
    }
  });

  it('publishes the api ports on loopback unless the operator says otherwise (/metrics is open without METRICS_TOKEN)', () => {
    expect(service('api', operatorEnv).ports).toEqual(['127.0.0.1:3000-3009:3000']);
    expect(service('api', { ...operatorEnv, API_BIND: '0.0.0.0' }).ports).toEqual(['0.0.0.0:3000-3009:3000']);
    expect(service('worker', operatorEnv).ports).toBeUndefined();
  });

  it.each(['api', 'worker'])('lets the %s service finish its graceful stop before Docker kills it', (name) => {
    const definition = service(name, operatorEnv);
    // What the process will allow itself: SHUTDOWN_TIMEOUT_MS as this environment leaves it (the default).
    const { shutdownTimeoutMs } = loadConfig(containerEnv(definition, operatorEnv));
    expect(definition.stop_grace_period).toBeDefined();
    // "A few seconds more" (README): the process's own exit on timeout must come before the SIGKILL.
    expect(parseDurationMs(definition.stop_grace_period!)).toBeGreaterThanOrEqual(shutdownTimeoutMs + 5_000);
  });

  it('runs PostgreSQL with room for the scale it advertises (--scale api=N --scale worker=M)', () => {
    const readme = readFileSync(path.join(REPO, 'README.md'), 'utf8');
    const advertised = /--scale api=(\d+)\s+--scale worker=(\d+)/;
    const [, apis, workers] = advertised.exec(composeText)!.map(Number);
    // README says the same scale.
    expect(advertised.exec(readme.replace(/`\s+--/g, ' --').replace(/\n/g, ' '))?.slice(1).map(Number)).toEqual([apis, workers]);
    // Per process at most DATABASE_POOL_MAX + 12, +1 for a worker (README's arithmetic, quoted here so the two change together).
    expect(readme).toContain('per process at most `DATABASE_POOL_MAX` + 12 (+1 for a worker');
    const poolMax = (name: string) => loadConfig(containerEnv(service(name, operatorEnv), operatorEnv)).databasePoolMax;
    const opened = apis! * (poolMax('api') + 12) + workers! * (poolMax('worker') + 13);
    expect(readme).toContain(`${apis} api + ${workers} workers reach ${opened}`);
    // PostgreSQL keeps 3 connections for superusers (superuser_reserved_connections); migrate or the admin CLI take 2 more.
    const command = service('postgres', operatorEnv).command ?? [];
    const setting = command.map((arg) => /^max_connections=(\d+)$/.exec(arg)?.[1]).find(Boolean);
    const maxConnections = Number(setting ?? 100);
    expect(opened + 3 + 2).toBeLessThanOrEqual(maxConnections);
  });

  it('runs every docker compose command the README and compose.yaml show with the variables of one .env file', () => {
    const readme = readFileSync(path.join(REPO, 'README.md'), 'utf8');
    const shown = [...readme.split('\n'), ...composeText.split('\n').map((line) => line.replace(/^#\s*/, ''))].filter((line) => /\bdocker compose\b/.test(line) && !line.includes('`'));
    expect(shown.length).toBeGreaterThanOrEqual(4);
    // A VAR=value in front of one command is gone for the next (the scale-out answered "ENCRYPTION_KEY is missing a value").
    for (const line of shown) expect([line, /^\s*[A-Z_]+=/.test(line)]).toEqual([line, false]);
    // The README's own line that writes .env, run as shown (with a fixed key instead of openssl's), gives compose what it needs.
    const writer = readme.split('\n').find((line) => line.startsWith('printf ') && line.endsWith('> .env'))!;
    expect(writer).toContain('"$(openssl rand -base64 32)"');
    const dir = mkdtempSync(path.join(os.tmpdir(), 'compose-env-'));
    execFileSync('bash', ['-c', writer.replace('"$(openssl rand -base64 32)"', `'${operatorEnv.ENCRYPTION_KEY}'`)], { cwd: dir });
    const dotEnv = Object.fromEntries(readFileSync(path.join(dir, '.env'), 'utf8').trim().split('\n').map((line) => line.split(/=(.*)/s).slice(0, 2)));
    expect(dotEnv).toEqual(operatorEnv);
    for (const name of ['migrate', 'api', 'worker']) {
      expect(loadConfig(containerEnv(service(name, dotEnv), dotEnv)).publicBaseUrl).toBe('https://pay.example.com');
    }
  });

  it("shows the admin CLI and migrate run inside compose services, with the scripts the image has, and the database password set before the first up", () => {
    const readme = readFileSync(path.join(REPO, 'README.md'), 'utf8');
    const scripts = (JSON.parse(readFileSync(path.join(REPO, 'package.json'), 'utf8')) as { scripts: Record<string, string> }).scripts;
    const inService = readme.split('\n').filter((line) => /^docker compose (exec|run --rm) \w+ node /.test(line));
    expect(inService.length).toBeGreaterThanOrEqual(2);
    for (const line of inService) {
      const [, name, file] = /^docker compose (?:exec|run --rm) (\w+) node (\S+)/.exec(line)!;
      // A service compose defines, running a file an npm script of the production image runs.
      expect([line, service(name!, operatorEnv).image]).toEqual([line, 'payments-service']);
      // (Less the scripts' NODE_ENV default: compose sets NODE_ENV=production in these services.)
      expect([line, Object.values(scripts).map((script) => script.replace(/^NODE_ENV=\$\{NODE_ENV:-production\} /, '')).includes(`node ${file}`)]).toEqual([line, true]);
    }
    expect(inService.some((line) => line.includes('dist/server/admin/cli.js'))).toBe(true);
    expect(inService.some((line) => line.includes('dist/server/migrate.js'))).toBe(true);
    // Written to .env before `docker compose up` (PostgreSQL reads it only when it creates its volume).
    const lines = readme.split('\n');
    const password = lines.findIndex((line) => /^printf 'POSTGRES_PASSWORD=/.test(line) && line.endsWith('>> .env'));
    const firstUp = lines.findIndex((line) => line.startsWith('docker compose up'));
    expect(password).toBeGreaterThan(-1);
    expect(password).toBeLessThan(firstUp);
  });
});
