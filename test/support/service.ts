import { mkdirSync } from 'node:fs';
import { mkdtemp } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { inOrmScope } from '../../server/persistence/orm-scope.js';
import { destination } from 'pino';
import supertest from 'supertest';
import type { Scope } from '../../contract/index.js';
import { SCOPES } from '../../contract/index.js';
import { loadConfig } from '../../server/config/config.js';
import { createLogger } from '../../server/observability/logger.js';
import { startService, type RunningService } from '../../server/service.js';
import { adminDatabaseUrl, createTestDatabase, sql } from './database.js';
import { TEST_ENCRYPTION_KEY } from './test-key.js';

export { TEST_ENCRYPTION_KEY };

export interface TestService {
  baseUrl: string;
  databaseUrl: string;
  service: RunningService;
  http: ReturnType<typeof supertest>;
  /** A merchant and an API key with the given scopes (all scopes by default). */
  createMerchant(name?: string, scopes?: readonly Scope[]): Promise<{ merchantId: string; apiKey: string; keyId: string }>;
  issueKey(merchantId: string, scopes: readonly Scope[]): Promise<{ apiKey: string; keyId: string }>;
  sql<T extends Record<string, unknown> = Record<string, unknown>>(text: string, params?: unknown[]): Promise<T[]>;
  /** Runs domain code with a request context, as the HTTP layer and jobs do. */
  inContext<T>(fn: () => Promise<T>): Promise<T>;
  stop(): Promise<void>;
}

/**
 * Boots the real service for one test file: a fresh PostgreSQL database, migrations, the API on an
 * ephemeral loopback port (simulators mounted under /sandbox), and an Agenda worker — all in this
 * process, all over real connections. `env` overrides configuration; `agendaLockLifetimeMs`, the jobs'
 * lock lifetime (5 s), which also bounds a run of the jobs that work off due rows in batches (jobs/drain-due.ts);
 * `databaseSettings`, what every session of the database starts with (`ALTER DATABASE … SET`, e.g. a
 * TimeZone: an operator's server may have one), set before the service connects; `withoutSimulatorKeys`,
 * a database without the simulators' key pairs the template has (scripts/prepare-test-template.ts), so the
 * boot makes them as on a new deployment; `database`, an existing database (another cluster's) used instead of a
 * fresh one, left in place by stop(); `connectVia`, where the service reaches the database instead of its
 * URL (a test's TCP relay: `(url) => proxy.start(url)`), the test's own queries still going straight to it.
 */
export async function startTestService(
  env: Record<string, string> = {},
  options: {
    agendaLockLifetimeMs?: number;
    databaseSettings?: Record<string, string>;
    withoutSimulatorKeys?: boolean;
    database?: { url: string };
    connectVia?: (databaseUrl: string) => Promise<string>;
  } = {},
): Promise<TestService> {
  const db = options.database ? { url: options.database.url, name: new URL(options.database.url).pathname.slice(1), drop: async () => undefined } : await createTestDatabase();
  if (options.withoutSimulatorKeys) await sql(db.url, 'DELETE FROM sandbox_walletpay_keys; DELETE FROM sandbox_mobilemoney_keys');
  for (const [name, value] of Object.entries(options.databaseSettings ?? {})) {
    if (!/^[a-z_]+$/i.test(name)) throw new Error(`not a setting name: ${name}`);
    await sql(adminDatabaseUrl(), `ALTER DATABASE ${db.name} SET ${name} = '${value.replace(/'/g, "''")}'`);
  }
  const dataDir = await mkdtemp(path.join(os.tmpdir(), 'payments-test-data-'));
  const logDir = path.resolve('test-results', 'logs');
  mkdirSync(logDir, { recursive: true });
  const config = loadConfig({
    NODE_ENV: 'test',
    PORT: '0',
    DATABASE_URL: options.connectVia ? await options.connectVia(db.url) : db.url,
    ENCRYPTION_KEY: TEST_ENCRYPTION_KEY,
    DATA_DIR: dataDir,
    LOG_LEVEL: 'info',
    SANDBOX: 'true',
    SANDBOX_CALLBACK_DELAY_MS: '50',
    WEBHOOK_RETRY_SCHEDULE: '100ms,100ms,100ms,100ms,100ms',
    WEBHOOK_TIMEOUT_MS: '2000',
    // Longer than an in-process simulator takes to answer on a loaded 2-core CI host; tests about provider timeouts set their own.
    PROVIDER_TIMEOUT_MS: '10000',
    DELIVERY_SWEEP_INTERVAL: '1s',
    STATUS_SYNC_POLL_INTERVAL: '500ms',
    ...env,
  });
  // Every test run's logs are kept, so a test can prove no secret ever reaches them.
  const logFile = path.join(logDir, `${db.name}.log`);
  const logger = createLogger('info', destination({ dest: logFile, sync: true }));
  // A short lock lifetime: Agenda keeps a timer of half of it alive after every job run (a test file's exit waits for it).
  // Agenda polls every 500 ms (each poll: one locking UPDATE per job definition, some 20); a job announced
  // by NOTIFY to run before the next poll is taken at once, so only the poll's cost depends on it.
  const service = await startService(config, { logger, agendaProcessEveryMs: 500, agendaLockLifetimeMs: options.agendaLockLifetimeMs ?? 5000 });
  const { container } = service;
  const baseUrl = service.baseUrl;

  const issueKey = async (merchantId: string, scopes: readonly Scope[]) =>
    inOrmScope(container.orm.em, async () => {
      const { id, key } = await container.services.apiKeys.issue(merchantId, [...scopes]);
      return { apiKey: key, keyId: id };
    });

  return {
    baseUrl,
    databaseUrl: db.url,
    service,
    http: supertest(baseUrl),
    issueKey,
    async createMerchant(name = 'Test merchant', scopes = SCOPES) {
      const merchant = await inOrmScope(container.orm.em, () => container.services.merchants.create(name));
      const key = await issueKey(merchant.id, scopes);
      return { merchantId: merchant.id, ...key };
    },
    sql: (text, params) => sql(db.url, text, params),
    inContext: (fn) => inOrmScope(container.orm.em, fn),
    async stop() {
      await service.stop();
      await db.drop();
    },
  };
}
