/**
 * `npm run migrate` (production build: `npm run migrate:prod`): applies pending migrations to
 * DATABASE_URL (or the embedded database in DATA_DIR) and exits. Safe to run while services are up
 * and from several places at once: the schema lock serialises it with every boot. `--down-to` rolls
 * the schema back to an earlier release's (README, Production: rolling back).
 */
import path from 'node:path';
import { parseArgs } from 'node:util';
import { ConfigError, loadConfig } from './config/config.js';
import type { EmbeddedDatabase } from './persistence/embedded-postgres.js';
// MikroORM and the migrations are imported by run() once the arguments are known to be good: --help
// and a usage error are answered without loading them.

const HELP = `usage: migrate [--status | --down-to MIGRATION]

Applies every pending database migration to DATABASE_URL (without it, to the embedded PostgreSQL in
DATA_DIR), the job runner's table among them, then exits. Prints JSON: {"applied":[…]}.

  --status              only list the applied and the pending migrations ({"applied":[…],"pending":[…]});
                        exits 0 either way
  --down-to MIGRATION   revert every migration applied after MIGRATION (the last one an earlier release
                        has), newest first, in one transaction; prints {"reverted":[…]}. Stop the api and
                        worker processes first, then start the earlier release
  --help                this text`;

/** A command line that asks for nothing this command does: exit 64 with the help, as a configuration error. */
class UsageError extends Error {}

function parseFlags(argv: string[]) {
  try {
    return parseArgs({ args: argv, options: { help: { type: 'boolean' }, status: { type: 'boolean' }, 'down-to': { type: 'string' } } }).values;
  } catch (err) {
    throw new UsageError((err as Error).message);
  }
}

async function run(argv: string[]): Promise<unknown> {
  const values = parseFlags(argv);
  if (values.help) return HELP;
  if (values.status && values['down-to'] !== undefined) throw new UsageError('--status and --down-to cannot be combined');
  const config = loadConfig();
  let embedded: EmbeddedDatabase | null = null;
  let databaseUrl = config.databaseUrl;
  if (!databaseUrl) {
    // The cluster a running `npm start` holds, if any (README: safe to run while services are up).
    const { embeddedForCommand } = await import('./persistence/embedded-postgres.js');
    embedded = await embeddedForCommand(path.join(config.dataDir, 'postgres'), { log: (line) => process.stderr.write(`${line}\n`) });
    databaseUrl = embedded.url;
  }
  const [{ appliedMigrations, migrate, NotAppliedMigrationError, openOrm, pendingMigrations, revertMigrationsAfter }, { withSchemaLock }] = await Promise.all([
    import('./persistence/orm.js'),
    import('./persistence/schema-lock.js'),
  ]);
  const orm = await openOrm(databaseUrl, 2);
  try {
    if (values.status) return { applied: await appliedMigrations(orm), pending: await pendingMigrations(orm) };
    const url = databaseUrl;
    const downTo = values['down-to'];
    if (downTo !== undefined) {
      return await withSchemaLock(url, async () => ({ reverted: await revertMigrationsAfter(orm, downTo) })).catch((err: unknown) => {
        throw err instanceof NotAppliedMigrationError ? new UsageError(err.message) : err;
      });
    }
    return await withSchemaLock(url, async () => ({ applied: await migrate(orm) }));
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
    // Only the command line and the configuration are usage errors: anything else (a TypeError of the
    // driver, the ORM or a migration included) failed while migrating.
    const usage = err instanceof ConfigError || err instanceof UsageError;
    process.stderr.write(usage ? `${err.message}\n${HELP}\n` : `migrate failed: ${err.message}\n`);
    process.exit(usage ? 64 : 1);
  },
);
