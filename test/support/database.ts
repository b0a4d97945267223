import { randomBytes } from 'node:crypto';
import { appendFileSync, mkdirSync } from 'node:fs';
import path from 'node:path';
import { expect } from '@jest/globals';
import pg from 'pg';

/** Which test file made which database: `npm test` prints a failed file's service logs (named by database) from it. */
const DATABASES_INDEX = path.resolve('test-results', 'test-databases.tsv');

export function adminDatabaseUrl(): string {
  const url = process.env.TEST_DATABASE_URL;
  if (!url) throw new Error('TEST_DATABASE_URL is not set: run the tests with `npm test`');
  return url;
}

function withDatabase(url: string, name: string): string {
  const parsed = new URL(url);
  parsed.pathname = `/${name}`;
  return parsed.toString();
}

/**
 * A fresh database on the test server for one test file; dropped by `drop()`. It is a copy of the
 * run's migrated template (scripts/run-tests.mjs), or with `empty` a database with nothing in it (for
 * tests about migrations themselves).
 */
export async function createTestDatabase({ empty = false } = {}): Promise<{ url: string; name: string; drop(): Promise<void> }> {
  const admin = adminDatabaseUrl();
  const name = `payments_test_${Date.now().toString(36)}_${randomBytes(4).toString('hex')}`;
  const template = empty ? undefined : process.env.TEST_TEMPLATE_DATABASE;
  const client = new pg.Client({ connectionString: admin });
  await client.connect();
  await client.query(template ? `CREATE DATABASE ${name} TEMPLATE ${template}` : `CREATE DATABASE ${name}`);
  await client.end();
  mkdirSync(path.dirname(DATABASES_INDEX), { recursive: true });
  appendFileSync(DATABASES_INDEX, `${name}\t${path.relative(process.cwd(), expect.getState().testPath ?? 'unknown')}\n`);
  return {
    name,
    url: withDatabase(admin, name),
    async drop() {
      const c = new pg.Client({ connectionString: admin });
      await c.connect();
      await c.query(`DROP DATABASE IF EXISTS ${name} WITH (FORCE)`);
      await c.end();
    },
  };
}

/** Runs SQL directly against a test database: how tests look at what is really stored. */
export async function sql<T extends pg.QueryResultRow = Record<string, unknown>>(url: string, text: string, params: unknown[] = []): Promise<T[]> {
  const client = new pg.Client({ connectionString: url });
  await client.connect();
  try {
    return (await client.query<T>(text, params)).rows;
  } finally {
    await client.end();
  }
}
