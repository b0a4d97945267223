import type { MikroORM } from '@mikro-orm/postgresql';
import { migrate, openOrm, revertMigrationsAfter } from '../../server/persistence/orm.js';
import { createTestDatabase } from './database.js';

/**
 * A new database at the schema of the release whose last migration is `migration` (migrated, then rolled
 * back to it), with a two-connection ORM on it: what the next `migrate` of a later release meets.
 */
export async function databaseAt(migration: string): Promise<{ db: Awaited<ReturnType<typeof createTestDatabase>>; orm: MikroORM }> {
  const db = await createTestDatabase({ empty: true });
  const orm = await openOrm(db.url, 2);
  await migrate(orm);
  await revertMigrationsAfter(orm, migration);
  return { db, orm };
}
