import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import { createTestDatabase, sql } from '../support/database.js';
import { inOrmScope } from '../../server/persistence/orm-scope.js';
import { migrateCli, runCli } from '../support/processes.js';
import { startTestService, TEST_ENCRYPTION_KEY, type TestService } from '../support/service.js';

// Every connection the service opens follows DATABASE_URL in full, its query parameters (sslmode,
// sslrootcert, application_name, options…) included: the ORM's pool, which carries every payment write,
// the migrate command and the admin CLI, as much as the job runner's, the locks' and the listeners'.

let db: Awaited<ReturnType<typeof createTestDatabase>>;

/** The test database's URL with a password (any is accepted here) and `query` appended. */
function databaseUrl(query: string): string {
  const url = new URL(db.url);
  url.password = 'url-secret-7f3a';
  url.search = query;
  return url.toString();
}

beforeAll(async () => {
  db = await createTestDatabase();
});

afterAll(async () => {
  await db?.drop();
});

describe('DATABASE_URL query parameters', () => {
  let service: TestService;
  afterAll(async () => {
    await service?.stop();
  });

  it('reach every pool: application_name is the ORM pool\'s and every other connection\'s', async () => {
    service = await startTestService({ DATABASE_URL: databaseUrl('?application_name=payments-url-probe') });
    const { orm } = service.service.container;
    const rows = await inOrmScope(orm.em, () => orm.em.getConnection().execute<{ name: string }[]>("SELECT current_setting('application_name') AS name"));
    expect(rows).toEqual([{ name: 'payments-url-probe' }]);

    // A request through the ORM, and the job runner's and listener's connections opened at boot.
    const merchant = await service.createMerchant('URL probe');
    expect((await service.http.get('/v1/payments').set('X-API-Key', merchant.apiKey)).status).toBe(200);
    const names = await sql<{ application_name: string }>(
      db.url,
      'SELECT DISTINCT application_name FROM pg_stat_activity WHERE datname = current_database() AND pid <> pg_backend_pid()',
    );
    expect(names).toEqual([{ application_name: 'payments-url-probe' }]);
  }, 60_000);
});

describe('sslmode=require against a server that offers no TLS (this one)', () => {
  const noTls = 'The server does not support SSL connections';

  it('makes migrate refuse, with the reason and without the password', async () => {
    for (const args of [['--status'], []]) {
      const run = await migrateCli(databaseUrl('?sslmode=require'), args);
      expect({ code: run.code, said: run.stderr.includes(`migrate failed: ${noTls}`) }).toEqual({ code: 1, said: true });
      expect(run.stdout + run.stderr).not.toContain('url-secret-7f3a');
    }
  }, 60_000);

  it('makes the service refuse to start, with the reason and without the password', async () => {
    const env = { DATABASE_URL: databaseUrl('?sslmode=require'), ENCRYPTION_KEY: TEST_ENCRYPTION_KEY, NODE_ENV: 'test', ROLE: 'api', PORT: '0' };
    const run = await runCli('server/main.ts', [], env);
    expect({ code: run.code, said: run.stderr.includes(`failed to start: ${noTls}`) }).toEqual({ code: 1, said: true });
    expect(run.stdout + run.stderr).not.toContain('url-secret-7f3a');
  }, 60_000);

  it('makes the admin CLI refuse, with the reason and without the password', async () => {
    // As in production, where it does not migrate (the schema lock's connection would refuse first).
    const env = { DATABASE_URL: databaseUrl('?sslmode=require'), ENCRYPTION_KEY: TEST_ENCRYPTION_KEY, NODE_ENV: 'test', MIGRATE_ON_BOOT: 'false' };
    const run = await runCli('server/admin/cli.ts', ['merchant', 'create', '--name', 'Over TLS'], env);
    expect({ code: run.code, said: run.stderr.includes(noTls) }).toEqual({ code: 1, said: true });
    expect(run.stdout + run.stderr).not.toContain('url-secret-7f3a');
    // Nothing was written over the connection that should have been encrypted.
    expect(await sql(db.url, "SELECT 1 FROM merchants WHERE name = 'Over TLS'")).toEqual([]);
  }, 60_000);
});
