import type { MikroORM } from '@mikro-orm/postgresql';

/** The property marking an error the ORM's pool threw while obtaining a connection (see markAcquireFailures). */
const MARK = 'connectionNotObtained';

/** knex's client (the ORM's pool) as far as this file uses it. */
interface KnexPoolClient {
  acquireConnection(): Promise<unknown>;
}

/**
 * Marks every error the ORM's pool throws while obtaining a connection: one that could not be opened
 * (refused, no such host, the server shutting down or refusing the login, the connect timing out) or
 * none free in time. knex throws a failed connect at once, as the driver's own error, indistinguishable
 * by its shape from the same error on a connection already in use (pg's "Connection terminated
 * unexpectedly", a 57P01 admin shutdown), after which a write may have been done. Marked here, the
 * error says for sure that nothing was sent for the statement it was to carry. A string property, since
 * MikroORM's DriverException copies the driver error's own properties, not its symbols.
 */
export function markAcquireFailures(orm: MikroORM): void {
  const client = orm.em.getConnection().getKnex().client as unknown as KnexPoolClient;
  const acquire = client.acquireConnection.bind(client);
  client.acquireConnection = async () => {
    try {
      return await acquire();
    } catch (err) {
      if (err !== null && typeof err === 'object' && Object.isExtensible(err)) Object.defineProperty(err, MARK, { value: true, configurable: true });
      throw err;
    }
  };
}

/** Whether `err` (or its cause) is one markAcquireFailures marked. */
export function connectionNotObtained(err: unknown): boolean {
  for (let e = err as Record<string, unknown> | null | undefined, depth = 0; e && typeof e === 'object' && depth < 5; e = e.cause as typeof e, depth++) {
    if (e[MARK] === true) return true;
  }
  return false;
}
