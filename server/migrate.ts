/**
 * `npm run migrate` (production build: `npm run migrate:prod`): applies pending migrations to
 * DATABASE_URL (or the embedded database in DATA_DIR) and exits. Safe to run while services are up
 * and from several places at once: the schema lock serialises it with every boot.
 */
import path from 'node:path';
import { parseArgs } from 'node:util';
import { ConfigError, loadConfig } from './config/config.js';
import type { EmbeddedDatabase } from './persistence/embedded-postgres.js';
import { migrate, openOrm, pendingMigrations } from './persistence/orm.js';
import { withSchemaLock } from './persistence/schema-lock.js';
import { createAgenda } from './jobs/agenda.js';

const HELP = `usage: migrate [--status]

Applies every pending database migration to DATABASE_URL (without it, to the embedded PostgreSQL in
DATA_DIR), including the job runner's tables, then exits. Prints JSON: {"applied":[…]}.

  --status   only list the pending migrations ({"pending":[…]}); exits 0 either way
  --help     this text`;

async function run(argv: string[]): Promise<unknown> {
  const { values } = parseArgs({ args: argv, options: { help: { type: 'boolean' }, status: { type: 'boolean' } } });
  if (values.help) return HELP;
  const config = loadConfig();
  let embedded: EmbeddedDatabase | null = null;
  let databaseUrl = config.databaseUrl;
  if (!databaseUrl) {
    const { startEmbeddedPostgres } = await import('./persistence/embedded-postgres.js');
    embedded = await startEmbeddedPostgres(path.join(config.dataDir, 'postgres'), { log: (line) => process.stderr.write(`${line}\n`) });
    databaseUrl = embedded.url;
  }
  const orm = await openOrm(databaseUrl, 2);
  try {
    if (values.status) return { pending: await pendingMigrations(orm) };
    const url = databaseUrl;
    return await withSchemaLock(url, async () => {
      // Agenda creates agenda_jobs as it connects; do it here too, so a service booted with
      // MIGRATE_ON_BOOT=false finds every table in place.
      const { agenda, closePool } = createAgenda({ databaseUrl: url, name: 'migrate', processEveryMs: 60_000, lockLifetimeMs: 60_000, poolMax: 1 });
      try {
        await agenda.ready;
      } finally {
        await agenda.stop().catch(() => undefined);
        await closePool().catch(() => undefined);
      }
      return { applied: await migrate(orm) };
    });
  } finally {
    await orm.close(true);
    if (embedded) await embedded.stop();
  }
}

run(process.argv.slice(2)).then(
  (result) => {
    process.stdout.write(typeof result === 'string' ? `${result}\n` : `${JSON.stringify(result)}\n`);
    process.exit(0);
  },
  (err: Error) => {
    process.stderr.write(err instanceof ConfigError || err instanceof TypeError ? `${err.message}\n${HELP}\n` : `migrate failed: ${err.message}\n`);
    process.exit(err instanceof ConfigError || err instanceof TypeError ? 64 : 1);
  },
);
