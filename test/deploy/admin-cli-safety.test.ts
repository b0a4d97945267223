import { existsSync, mkdtempSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import { createTestDatabase, sql } from '../support/database.js';
import { adminCli, runCli } from '../support/processes.js';
import { TEST_ENCRYPTION_KEY } from '../support/test-key.js';

// The admin CLI run by an operator from a bastion shell with only DATABASE_URL exported (no NODE_ENV,
// no ENCRYPTION_KEY), as a process. It must neither make up an encryption key (`secrets reseal` then
// re-encrypted every secret under it, and every service answered 503) nor touch a schema that is not
// this release's (migration-rollback.test.ts: one behind after `migrate --down-to`).

let db: Awaited<ReturnType<typeof createTestDatabase>>;
beforeAll(async () => {
  db = await createTestDatabase();
});
afterAll(async () => {
  await db?.drop();
});

const admin = (args: string[], env: Record<string, string>) => runCli('server/admin/cli.ts', args, { DATABASE_URL: db.url, ...env });
const freshDataDir = () => mkdtempSync(path.join(os.tmpdir(), 'admin-cli-data-'));

describe('the admin CLI without ENCRYPTION_KEY', () => {
  it('refuses the commands that use the key (merchant create, secrets reseal), generating none, and names what to set', async () => {
    const dataDir = freshDataDir();
    const before = await sql(db.url, 'SELECT id, webhook_secret_enc FROM merchants ORDER BY id');
    for (const command of [['secrets', 'reseal'], ['merchant', 'create', '--name', 'Bastion Shop']]) {
      const run = await admin(command, { DATA_DIR: dataDir });
      expect([run.code, run.stdout]).toEqual([64, '']);
      expect(run.stderr).toContain(`ENCRYPTION_KEY is not set and ${path.join(dataDir, 'encryption.key')} does not exist: set ENCRYPTION_KEY to the key the services use`);
    }
    expect(existsSync(path.join(dataDir, 'encryption.key'))).toBe(false);
    expect(await sql(db.url, 'SELECT id, webhook_secret_enc FROM merchants ORDER BY id')).toEqual(before);
  }, 60_000);

  it('runs the commands that need no key', async () => {
    const dataDir = freshDataDir();
    const run = await admin(['payment', 'recheck', '--unresolved'], { DATA_DIR: dataDir });
    expect([run.code, JSON.parse(run.stdout)]).toEqual([0, { restarted: [] }]);
    expect(existsSync(path.join(dataDir, 'encryption.key'))).toBe(false);
  }, 60_000);

  it('uses the key a service generated in DATA_DIR (one machine, npm start)', async () => {
    const dataDir = freshDataDir();
    writeFileSync(path.join(dataDir, 'encryption.key'), `${TEST_ENCRYPTION_KEY}\n`, { mode: 0o600 });
    const run = await admin(['merchant', 'create', '--name', 'Dev Shop'], { DATA_DIR: dataDir });
    expect([run.code, run.stderr]).toEqual([0, '']);
    expect(JSON.parse(run.stdout)).toMatchObject({ name: 'Dev Shop' });
  }, 60_000);
});

describe('the admin CLI on a later release\'s schema', () => {
  it('refuses to run, naming the migrations this release does not have', async () => {
    await sql(db.url, `INSERT INTO mikro_orm_migrations (name, executed_at) VALUES ('Migration20990101000001_future', now())`);
    try {
      const run = await admin(['merchant', 'create', '--name', 'Too Old'], { ENCRYPTION_KEY: TEST_ENCRYPTION_KEY });
      expect([run.code, run.stdout]).toEqual([1, '']);
      expect(run.stderr).toContain("the database has 1 migration(s) this release does not have (Migration20990101000001_future): its schema is a later release's; use that release's admin CLI");
      expect(await sql(db.url, `SELECT 1 FROM merchants WHERE name = 'Too Old'`)).toEqual([]);
    } finally {
      await sql(db.url, `DELETE FROM mikro_orm_migrations WHERE name = 'Migration20990101000001_future'`);
    }
  }, 60_000);
});

// What an operator types is what is issued, or nothing is: a stray word, a repeated or misspelt option,
// an empty scope entry is a usage error (exit 64), never a key with fewer scopes than asked (`--scopes
// payments:read, payments:write` issued a key with payments:read alone, exit 0).
describe('admin key commands refuse what they would otherwise drop', () => {
  const env = { ENCRYPTION_KEY: TEST_ENCRYPTION_KEY, NODE_ENV: 'test' };
  let merchantId: string;
  const keyCount = async () => (await sql<{ n: number }>(db.url, 'SELECT count(*)::int AS n FROM api_keys WHERE merchant_id = $1', [merchantId]))[0]!.n;
  beforeAll(async () => {
    merchantId = (await adminCli<{ merchant_id: string }>(db.url, ['merchant', 'create', '--name', 'Typo Shop'])).merchant_id;
  }, 60_000);

  it.each([
    ['a space after a comma (a stray argument)', ['--scopes', 'payments:read,', 'payments:write'], 'unexpected argument "payments:write"'],
    ['--scopes given twice', ['--scopes', 'payments:read', '--scopes', 'payments:write'], '--scopes is given more than once'],
    ['a trailing comma', ['--scopes', 'payments:read,'], 'empty scope entry in "payments:read,"'],
    ['two commas in a row', ['--scopes', 'payments:read,,payments:write'], 'empty scope entry in "payments:read,,payments:write"'],
    ['a misspelt option', ['--scope', 'payments:read'], "Unknown option '--scope'"],
    ['an option of another command', ['--scopes', 'payments:read', '--name', 'x'], '--name is not an option of key create'],
    ['an unknown scope', ['--scopes', 'payments:everything'], 'unknown scope(s): payments:everything'],
  ])('key create with %s: exit 64, a clear message, no key', async (_case, args, message) => {
    const run = await admin(['key', 'create', '--merchant', merchantId, ...args], env);
    expect([run.code, run.stdout]).toEqual([64, '']);
    expect(run.stderr).toContain(message);
    expect(run.stderr).toContain('usage: admin key create');
    expect(await keyCount()).toBe(0);
  }, 60_000);

  it('key create prints what was stored: the merchant and the scopes, beside the id and the key', async () => {
    const run = await admin(['key', 'create', '--merchant', merchantId, '--scopes', 'payments:write,payments:read,payments:read'], env);
    expect([run.code, run.stderr]).toEqual([0, '']);
    const issued = JSON.parse(run.stdout) as Record<string, unknown>;
    expect(issued).toEqual({ id: expect.any(String), key: expect.stringMatching(/^pk_/), merchant_id: merchantId, scopes: ['payments:write', 'payments:read'] });
    expect(await sql(db.url, 'SELECT merchant_id, scopes FROM api_keys WHERE id = $1', [issued.id])).toEqual([{ merchant_id: merchantId, scopes: ['payments:write', 'payments:read'] }]);
  }, 60_000);

  it('key list of a merchant that does not exist says so (exit 1), as key create does', async () => {
    const unknown = '00000000-0000-4000-8000-000000000000';
    for (const command of [['key', 'list', '--merchant', unknown], ['key', 'create', '--merchant', unknown, '--scopes', 'payments:read']]) {
      const run = await admin(command, env);
      expect({ command, code: run.code, stdout: run.stdout, stderr: run.stderr.trim() }).toEqual({ command, code: 1, stdout: '', stderr: `merchant ${unknown} not found` });
    }
  }, 60_000);

  it('key revoke --help says what a revocation does: refused everywhere within a second, not at once', async () => {
    const run = await admin(['key', 'revoke', '--help'], {});
    expect(run.code).toBe(0);
    expect(run.stdout).toContain('within a second');
    expect(run.stdout).not.toContain('at once');
  }, 60_000);
});

// README, Production: NODE_ENV=production is exported for every command; only merchant create and
// secrets reseal use ENCRYPTION_KEY. A leaked key is revoked from a bastion shell with DATABASE_URL
// alone (every key command refused with "ENCRYPTION_KEY is required when NODE_ENV=production").
describe('the admin CLI in production without ENCRYPTION_KEY', () => {
  const production = { NODE_ENV: 'production' };

  it('issues, lists and revokes keys', async () => {
    const { merchant_id: merchantId } = await adminCli<{ merchant_id: string }>(db.url, ['merchant', 'create', '--name', 'Leaky Shop']);
    const created = await admin(['key', 'create', '--merchant', merchantId, '--scopes', 'payments:read'], production);
    expect([created.code, created.stderr]).toEqual([0, '']);
    const { id } = JSON.parse(created.stdout) as { id: string };
    const revoked = await admin(['key', 'revoke', '--id', id], production);
    expect([revoked.code, revoked.stderr]).toEqual([0, '']);
    const [{ revoked_at: revokedAt }] = await sql<{ revoked_at: Date | null }>(db.url, 'SELECT revoked_at FROM api_keys WHERE id = $1', [id]) as [{ revoked_at: Date | null }];
    expect(revokedAt).toBeInstanceOf(Date);
    expect((JSON.parse(revoked.stdout) as { revoked_at: string }).revoked_at).toBe(revokedAt!.toISOString());
    const list = await admin(['key', 'list', '--merchant', merchantId], production);
    expect([list.code, JSON.parse(list.stdout)]).toEqual([0, [expect.objectContaining({ id, revoked_at: revokedAt!.toISOString() })]]);
  }, 60_000);

  it('still refuses the commands that use the key', async () => {
    for (const command of [['secrets', 'reseal'], ['merchant', 'create', '--name', 'Keyless Shop']]) {
      const run = await admin(command, production);
      expect({ command, code: run.code, stdout: run.stdout, stderr: run.stderr.trim() }).toEqual({ command, code: 64, stdout: '', stderr: 'ENCRYPTION_KEY is required when NODE_ENV=production' });
    }
  }, 60_000);
});
