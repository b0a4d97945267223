import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import net from 'node:net';
import { Writable } from 'node:stream';
import { MikroORM } from '@mikro-orm/postgresql';
import { ormOptions } from '../../server/persistence/orm.js';
import { createLogger } from '../../server/observability/logger.js';
import { safeError } from '../../server/observability/safe-error.js';
import { adminDatabaseUrl } from '../support/database.js';

// What an operator reads in the log when the database fails. A statement's error quotes the statement
// and its values (request data), so it is withheld; a connection failure quotes neither, and must read
// as an outage: its network code and pg's words, never the connection string's password.

const PASSWORD = 'pw-never-logged-8f3a';
const closed: Array<() => Promise<void>> = [];

/** The error a query through the service's ORM gets against `url` (the pool connects on first use, as in a running service). */
async function queryError(url: string): Promise<unknown> {
  const orm = await MikroORM.init({ ...ormOptions(url, 2, 2_000), connect: false });
  closed.push(() => orm.close(true).catch(() => undefined));
  return orm.em.fork().execute('SELECT 1').then(() => null, (err: unknown) => err);
}

/** What the logger writes for `err` (its serializer is safeError). */
function logged(err: unknown): string {
  let line = '';
  const destination = new Writable({ write: (chunk, _encoding, done) => ((line += String(chunk)), done()) });
  createLogger('info', destination).error({ err }, 'claiming due webhook deliveries failed');
  return line;
}

let refusedPort: number;
let hangUp: net.Server;
beforeAll(async () => {
  // A port nobody listens on, and a server that accepts and drops every connection (a database restarting).
  const probe = net.createServer().listen(0, '127.0.0.1');
  await new Promise((resolve) => probe.once('listening', resolve));
  refusedPort = (probe.address() as net.AddressInfo).port;
  await new Promise((resolve) => probe.close(resolve));
  hangUp = net.createServer((socket) => socket.destroy()).listen(0, '127.0.0.1');
  await new Promise((resolve) => hangUp.once('listening', resolve));
});

afterAll(async () => {
  for (const close of closed) await close();
  await new Promise((resolve) => hangUp.close(resolve));
});

describe('safeError: a database connection failure', () => {
  it('keeps ECONNREFUSED and the address it was refused at, never the password', async () => {
    const err = await queryError(`postgres://payments:${PASSWORD}@127.0.0.1:${refusedPort}/payments`);
    expect((err as Error).name).toBe('DriverException');
    expect(safeError(err)).toMatchObject({ type: 'DriverException', code: 'ECONNREFUSED', message: `database connection failed: ECONNREFUSED (127.0.0.1:${refusedPort})` });
    const line = logged(err);
    expect(line).toContain('"code":"ECONNREFUSED"');
    expect(line).not.toContain(PASSWORD);
  });

  it("keeps pg's 'Connection terminated unexpectedly', without the statement knex puts in front", async () => {
    const err = await queryError(`postgres://payments:${PASSWORD}@127.0.0.1:${(hangUp.address() as net.AddressInfo).port}/payments`);
    expect(safeError(err)).toMatchObject({ type: 'DriverException', message: 'database connection failed: Connection terminated unexpectedly' });
    const withStatement = Object.assign(new Error(`select "d".* from "webhook_deliveries" as "d" where "d"."merchant_id" = 'm-42' - Connection terminated unexpectedly`), { name: 'DriverException' });
    expect(safeError(withStatement).message).toBe('database connection failed: Connection terminated unexpectedly');
    expect(logged(err)).not.toContain(PASSWORD);
  });

  it('keeps a host that does not resolve by its code and name', async () => {
    const err = await queryError(`postgres://payments:${PASSWORD}@db.no-such-host.invalid:5432/payments`);
    const out = safeError(err);
    expect(out.code).toMatch(/^(ENOTFOUND|EAI_AGAIN)$/);
    expect(out.message).toBe(`database connection failed: ${out.code} (db.no-such-host.invalid)`);
  });

  it('masks the password of a connection string quoted in any other message', () => {
    const out = safeError(new Error(`cannot use postgres://payments:${PASSWORD}@db.internal:5432/payments: bad sslmode`));
    expect(out.message).toBe('cannot use postgres://[redacted]@db.internal:5432/payments: bad sslmode');
  });

  it('still withholds a failed statement and its values, keeping its SQLSTATE', async () => {
    const err = await MikroORM.init({ ...ormOptions(adminDatabaseUrl(), 2), connect: false }).then((orm) => {
      closed.push(() => orm.close(true).catch(() => undefined));
      return orm.em.fork().execute(`SELECT '{"phone":"254711987654"'::jsonb`).then(() => null, (e: unknown) => e);
    });
    expect(safeError(err)).toMatchObject({ code: '22P02', message: 'database error 22P02 (statement and values withheld)' });
    expect(logged(err)).not.toContain('254711987654');
  });
});
