/**
 * Admin CLI (outside the public API): merchants, API keys and the rotation of ENCRYPTION_KEY.
 *   npm run admin -- merchant create --name NAME          (production build: npm run admin:prod -- …)
 *   npm run admin -- key create --merchant ID --scopes a,b,c
 *   npm run admin -- key revoke --id KEYID
 *   npm run admin -- key list --merchant ID
 *   npm run admin -- secrets reseal
 *   npm run admin -- payment recheck --id ID | --unresolved      (and refund recheck)
 *   npm run admin -- refund settle --id ID --status failed --reason TEXT
 *   npm run admin -- payment settle --id ID --status failed --reason TEXT
 *   npm run admin -- [COMMAND] --help
 * Prints JSON on stdout; errors go to stderr with a non-zero exit. Works against DATABASE_URL (a
 * deployed database) or, without it, the embedded database in DATA_DIR.
 * It never changes the schema (only the migrate command does: a CLI run after `migrate --down-to` must
 * not apply again what was reverted, under the older release still running) and never generates an
 * encryption key (one made up in the operator's working folder would seal secrets no service opens).
 */
import path from 'node:path';
import { parseArgs } from 'node:util';
import type { EntityManager, MikroORM } from '@mikro-orm/postgresql';
import { ConfigError, loadConfig, type AppConfig } from '../config/config.js';
import { existingEncryptionKey } from '../config/encryption-key.js';
import { SCOPES, type Provider, type Scope } from '../../contract/index.js';
import { DomainError, notFound } from '../domain/errors.js';
import type { StatusWriter } from '../domain/payments/status-writer.js';
import type { EmbeddedDatabase } from '../persistence/embedded-postgres.js';
// The rest of the server (MikroORM, the entities, the providers, …) is imported by run() once the
// arguments are known to be good: --help and a usage error are answered without loading it.

const SCOPE_LIST = SCOPES.join(',');

const USAGE = `usage:
  admin merchant create --name NAME
  admin key create --merchant ID --scopes a,b,c
  admin key revoke --id KEYID
  admin key list --merchant ID
  admin secrets reseal
  admin payment recheck --id ID | --unresolved
  admin refund recheck --id ID | --unresolved
  admin refund settle --id ID --status failed --reason TEXT
  admin payment settle --id ID --status failed --reason TEXT
  admin COMMAND --help

Connects to DATABASE_URL (without it, the embedded PostgreSQL in DATA_DIR). Never migrates: it refuses
to run (exit 1) on a schema this release's migrate command has not brought to its own version, behind
or ahead. merchant create and secrets reseal use the service's encryption key:
ENCRYPTION_KEY, or the one a service generated in DATA_DIR; without either they refuse (exit 64) and
never make one up; the other commands run without it, NODE_ENV=production too. An option a command
does not take, one given twice or a word after the command is refused (exit 64). Prints JSON on
stdout; errors on stderr with a non-zero exit (64: usage or configuration).`;

const COMMAND_HELP: Record<string, string> = {
  'merchant create': `usage: admin merchant create --name NAME

Creates a merchant and prints {"merchant_id","name"}. Issue it a key with \`admin key create\`.

  --name NAME   the merchant's display name (required)`,
  'key create': `usage: admin key create --merchant ID --scopes a,b,c

Issues an API key and prints {"id","key","merchant_id","scopes"}: the key is shown once (only its
SHA-256 is stored); merchant_id and scopes are what was stored. A word after the options (a space
after a comma), an empty entry, an unknown scope or an option given twice is refused (exit 64).

  --merchant ID   the merchant's id (UUID, required)
  --scopes LIST   comma-separated scopes (required): ${SCOPE_LIST}`,
  'key revoke': `usage: admin key revoke --id KEYID

Revokes an API key: every process refuses it within a second (one that looked it up just before may
still accept it in that gap). Prints {"id","revoked_at"}; revoking it again keeps the first time.

  --id KEYID   the key's id (UUID, required; not the key itself)`,
  'key list': `usage: admin key list --merchant ID

Lists a merchant's keys and their scopes, never the keys themselves. Exits 1 when the merchant does
not exist.

  --merchant ID   the merchant's id (UUID, required)`,
  'secrets reseal': `usage: admin secrets reseal

Rotating ENCRYPTION_KEY: re-encrypts under ENCRYPTION_KEY every stored secret (provider credentials,
merchant webhook signing secrets) sealed with another key, opening it with DECRYPTION_KEYS. Prints
{"resealed":{…},"already_current":n,"unreadable":[…]}. Safe to run again and while the service runs.
Exits 1 when a secret opens with none of the keys (listed by table and id, never by content).`,
  'payment recheck': recheckHelp('payment'),
  'refund recheck': recheckHelp('refund'),
  'refund settle': `usage: admin refund settle --id ID --status failed --reason TEXT

For a refund left pending for an operator (a mobilemoney reversal refused after it was sent again:
only a success settles it on its own), once you checked at the provider's portal that no reversal
went through: fails it with your reason as its failure_reason, audited with the trigger \`operator\`;
the merchant gets refund.failed and the payment stays completed, so a new refund may be asked.
Prints {"refund_id","status","failure_reason"}. Only \`failed\`: a completed reversal needs the
operator's receipt and amount checked, which the refund sync's reports do (\`refund recheck\`).

  --id ID          the refund (UUID); exits 1 when it is not pending
  --status failed  the outcome (required; only failed)
  --reason TEXT    what you found at the provider (required)`,
  'payment settle': `usage: admin payment settle --id ID --status failed --reason TEXT

For a payment left pending for an operator: a mobilemoney push whose answer was lost (no provider_ref)
that reconciliation's pulls could not judge (they failed — the pull API needs the shortcode registered —
or can no longer reach back to it: the payments_unresolved gauge). First check at the operator's portal
that no transaction of the shortcode quotes the payment's reference; then this fails it with your
reason as its failure_reason, audited with the trigger \`operator\`, and the merchant gets payment.failed.
A charge found after all is reported charged_but_failed. Prints {"payment_id","status","failure_reason"}.
Only \`failed\`: a completed payment needs the receipt and amount checked, which reconciliation does
(POST /v1/payments/mobilemoney/reconcile with a window that covers the payment).

  --id ID          the payment (UUID); exits 1 when it is not pending, has a provider reference, can
                   be sent again (cardpay, walletpay: payment recheck), or awaits a pull (its first,
                   or a later one still booked while the operator's list reaches back to it)
  --status failed  the outcome (required; only failed)
  --reason TEXT    what you found at the provider (required)`,
};

function recheckHelp(what: 'payment' | 'refund'): string {
  return `usage: admin ${what} recheck --id ID | --unresolved

Asks the provider about a pending ${what} again: it is due a re-check now (a worker picks it within
STATUS_SYNC_POLL_INTERVAL) and STATUS_SYNC_SCHEDULE starts over. For one the schedule gave up on (the
${what === 'payment' ? 'payments_unresolved gauge' : 'refunds_pending_oldest_seconds gauge'}), after a long provider outage, say. Prints {"restarted":[ids]}.

  --id ID        one ${what} (UUID); exits 1 when it is not pending
  --unresolved   every pending ${what} whose re-checks ran out${what === 'payment' ? " (one awaiting the customer: past its provider's expiry)" : ''}`;
}

/**
 * The status writer, for an operator's settlement. Its webhook deliveries wake the workers as the
 * service's do (a NOTIFY after the commit; else the sweeper finds them); its logs go to stderr.
 */
async function operatorWriter(em: EntityManager): Promise<StatusWriter> {
  const [{ StatusWriter }, { DELIVERIES_DUE_CHANNEL }, { Metrics }, { createLogger }] = await Promise.all([
    import('../domain/payments/status-writer.js'),
    import('../jobs/delivery-queue.js'),
    import('../observability/metrics.js'),
    import('../observability/logger.js'),
  ]);
  const wake = { enqueue: async (count: number) => { if (count > 0) await em.getConnection().execute(`SELECT pg_notify(?, '')`, [DELIVERIES_DUE_CHANNEL]); } };
  return new StatusWriter(em, wake, new Metrics().integrityMismatches, createLogger('info', process.stderr));
}

/** Thrown to print help on stdout with exit 0. */
class HelpRequested extends Error {}

class UsageError extends Error {}

function required(values: Record<string, string | boolean | undefined>, name: string): string {
  const value = values[name];
  if (typeof value !== 'string' || !value) throw new UsageError(`--${name} is required\n${USAGE}`);
  return value;
}

/**
 * Refuses a schema this release does not match: migrations pending (run migrate; or, after a rollback
 * with --down-to, use the earlier release's CLI) or applied ones this release does not have (the schema
 * of a later release: use its CLI).
 */
async function assertSchemaMatches(orm: MikroORM): Promise<void> {
  const [{ migrationsList }, { appliedMigrations, migrationsPendingError, pendingMigrations }] = await Promise.all([
    import('../persistence/migrations/index.js'),
    import('../persistence/orm.js'),
  ]);
  const pending = await pendingMigrations(orm);
  if (pending.length > 0) throw migrationsPendingError(pending, 'the admin CLI never migrates (after migrate --down-to, use the earlier release\'s admin CLI)');
  const known = new Set(migrationsList.map((m) => m.name));
  const unknown = (await appliedMigrations(orm)).filter((name) => !known.has(name));
  if (unknown.length > 0) {
    throw new Error(`the database has ${unknown.length} migration(s) this release does not have (${unknown.slice(0, 3).join(', ')}${unknown.length > 3 ? ', …' : ''}): its schema is a later release's; use that release's admin CLI`);
  }
}

/** The service's key, as it is: never one generated here. */
async function serviceKey(config: AppConfig): Promise<string> {
  const key = await existingEncryptionKey(config);
  if (key) return key;
  throw new ConfigError(
    `ENCRYPTION_KEY is not set and ${path.join(config.dataDir, 'encryption.key')} does not exist: set ENCRYPTION_KEY to the key the services use (the admin CLI never generates one; secrets sealed under a new key open nowhere else)`,
  );
}

/** Commands that use the encryption key (reseal opens and seals; a merchant's service is built with the key, which seals its webhook secrets). */
const NEEDS_KEY = new Set(['merchant create', 'secrets reseal']);

const OPTIONS = {
  name: { type: 'string' }, merchant: { type: 'string' }, scopes: { type: 'string' }, id: { type: 'string' },
  unresolved: { type: 'boolean' }, status: { type: 'string' }, reason: { type: 'string' }, help: { type: 'boolean', short: 'h' },
} as const;

/** The options each command takes (and --help): any other is refused, never ignored. */
const COMMAND_OPTIONS: Record<string, readonly (keyof typeof OPTIONS)[]> = {
  'merchant create': ['name'],
  'key create': ['merchant', 'scopes'],
  'key revoke': ['id'],
  'key list': ['merchant'],
  'secrets reseal': [],
  'payment recheck': ['id', 'unresolved'],
  'refund recheck': ['id', 'unresolved'],
  'refund settle': ['id', 'status', 'reason'],
  'payment settle': ['id', 'status', 'reason'],
};

/**
 * The command and its options. What would otherwise be dropped is a usage error: an unknown option, a
 * word after the command (`--scopes a, b`: the space made "b" a word of its own), an option given twice
 * (the last one won) or one the command does not take.
 */
function parse(argv: string[]) {
  let parsed;
  try {
    parsed = parseArgs({ args: argv, allowPositionals: true, tokens: true, options: OPTIONS });
  } catch (err) {
    const { code, message } = err as NodeJS.ErrnoException;
    if (!String(code).startsWith('ERR_PARSE_ARGS_')) throw err;
    // Node's advice on positionals that start with '-' is no use here: the first sentence names the option.
    const reason = code === 'ERR_PARSE_ARGS_UNKNOWN_OPTION' ? message.slice(0, message.indexOf('.') + 1) || message : message;
    throw new UsageError(`${reason}\n${COMMAND_HELP[`${argv[0]} ${argv[1]}`] ?? USAGE}`);
  }
  const { positionals, values, tokens } = parsed;
  const [resource, action, ...extra] = positionals;
  const command = `${resource ?? ''} ${action ?? ''}`;
  const help = COMMAND_HELP[command];
  if (values.help) throw new HelpRequested(help ?? USAGE);
  if (!help) throw new UsageError(USAGE);
  if (extra.length > 0) {
    const hint = command === 'key create' ? ' (a space after a comma in --scopes? give the list without spaces: a,b,c)' : '';
    throw new UsageError(`unexpected argument ${extra.map((word) => JSON.stringify(word)).join(', ')}${hint}\n${help}`);
  }
  const seen = new Set<string>();
  for (const token of tokens) {
    if (token.kind !== 'option' || token.name === 'help') continue;
    if (seen.has(token.name)) throw new UsageError(`--${token.name} is given more than once: give it once\n${help}`);
    seen.add(token.name);
    if (!(COMMAND_OPTIONS[command] as readonly string[]).includes(token.name)) throw new UsageError(`--${token.name} is not an option of ${command}\n${help}`);
  }
  return { resource, command, values, help };
}

/** The scopes of `key create --scopes`: an empty entry or an unknown scope is a usage error. */
async function scopesOption(list: string, help: string): Promise<Scope[]> {
  if (list.split(',').some((entry) => !entry.trim())) throw new UsageError(`empty scope entry in ${JSON.stringify(list)}: give a comma-separated list without empty entries (a,b,c)\n${help}`);
  const { parseScopes } = await import('../domain/auth/api-key.service.js');
  try {
    return parseScopes(list);
  } catch (err) {
    if (err instanceof DomainError) throw new UsageError(`${err.message}\n${help}`);
    throw err;
  }
}

async function run(argv: string[]): Promise<unknown> {
  const { resource, command, values, help } = parse(argv);
  const scopes = command === 'key create' ? await scopesOption(required(values, 'scopes'), help) : [];
  // A command that never uses the key runs without it, in production too (a leaked key is revoked
  // from a bastion shell with DATABASE_URL alone).
  const config = loadConfig(process.env, { encryptionKeyOptional: !NEEDS_KEY.has(command) });
  // Before connecting anywhere.
  const key = NEEDS_KEY.has(command) ? await serviceKey(config) : null;
  let embedded: EmbeddedDatabase | null = null;
  let databaseUrl = config.databaseUrl;
  if (!databaseUrl) {
    const { embeddedForCommand } = await import('../persistence/embedded-postgres.js');
    embedded = await embeddedForCommand(path.join(config.dataDir, 'postgres'), { log: (line) => process.stderr.write(`${line}\n`) });
    databaseUrl = embedded.url;
  }
  const [
    { openOrm },
    { inOrmScope },
    { ApiKeyService },
    { resealSecrets },
    { SecretBox },
    { MerchantHostResolver },
    { MerchantService },
    { restartChecks },
    { operatorSettlementRefusal },
    { createProviderRegistry },
    { PaymentSchema, RefundSchema },
  ] = await Promise.all([
    import('../persistence/orm.js'),
    import('../persistence/orm-scope.js'),
    import('../domain/auth/api-key.service.js'),
    import('../domain/crypto/stored-secrets.js'),
    import('../domain/crypto/secret-box.js'),
    import('../domain/merchants/merchant-host-resolver.js'),
    import('../domain/merchants/merchant.service.js'),
    import('../domain/payments/sync-schedule.js'),
    import('../domain/payments/lost-creation.js'),
    import('../providers/registry.js'),
    import('../persistence/entities/index.js'),
  ]);
  const orm = await openOrm(databaseUrl, 2);
  try {
    await assertSchemaMatches(orm);
    const secrets = () => new SecretBox(key!, config.decryptionKeys);
    return await inOrmScope(orm.em, async () => {
      const keys = new ApiKeyService(orm.em);
      const uuid = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/i;
      const id = (name: string) => {
        const value = required(values, name);
        if (!uuid.test(value)) throw new UsageError(`--${name} must be a UUID`);
        return value;
      };
      switch (command) {
        case 'merchant create': {
          const merchant = await new MerchantService(orm.em, secrets(), config.webhookAllowPrivateUrls, new MerchantHostResolver(config.webhookDnsServers)).create(required(values, 'name'));
          return { merchant_id: merchant.id, name: merchant.name };
        }
        case 'key create':
          return keys.issue(id('merchant'), scopes);
        case 'key revoke':
          return keys.revoke(id('id'));
        case 'payment recheck':
        case 'refund recheck': {
          const table = command === 'payment recheck' ? 'payments' : 'refunds';
          if (values.unresolved === (values.id !== undefined)) throw new UsageError(`give --id or --unresolved\n${COMMAND_HELP[command]}`);
          const restarted = await restartChecks(orm.em, table, values.unresolved ? 'unresolved' : { id: id('id') });
          if (values.id !== undefined && restarted.length === 0) throw new DomainError('CONFLICT', `no pending ${resource} ${values.id}`);
          return { restarted };
        }
        case 'refund settle': {
          const refundId = id('id');
          if (required(values, 'status') !== 'failed') throw new UsageError(`--status must be failed (a completed reversal needs its receipt and amount checked: use refund recheck)\n${COMMAND_HELP[command]}`);
          const reason = required(values, 'reason').trim();
          if (!reason) throw new UsageError(`--reason is required\n${COMMAND_HELP[command]}`);
          const found = await orm.em.fork().findOne(RefundSchema, { id: refundId });
          if (!found) throw notFound('refund');
          const outcome = await (await operatorWriter(orm.em)).failPendingRefund(refundId, reason, 'operator');
          if (!outcome) {
            const now = await orm.em.fork().findOneOrFail(RefundSchema, { id: refundId });
            throw new DomainError('CONFLICT', `refund ${refundId} is ${now.status}, not pending: only a pending refund can be settled`);
          }
          return { refund_id: outcome.refund.id, status: outcome.refund.status, failure_reason: outcome.refund.failureReason };
        }
        case 'payment settle': {
          const paymentId = id('id');
          if (required(values, 'status') !== 'failed') throw new UsageError(`--status must be failed (a completed payment needs its receipt and amount checked: use reconciliation)\n${COMMAND_HELP[command]}`);
          const reason = required(values, 'reason').trim();
          if (!reason) throw new UsageError(`--reason is required\n${COMMAND_HELP[command]}`);
          const found = await orm.em.fork().findOne(PaymentSchema, { id: paymentId });
          if (!found) throw notFound('payment');
          const providers = createProviderRegistry(config, orm.em);
          const outcome = await (await operatorWriter(orm.em)).failLostPayment(paymentId, reason, 'operator', (p) => operatorSettlementRefusal(providers.get(p.provider as Provider), p));
          if (!outcome) {
            const now = await orm.em.fork().findOneOrFail(PaymentSchema, { id: paymentId });
            throw new DomainError('CONFLICT', `payment ${paymentId} is ${now.status}, not pending: only a pending payment can be settled`);
          }
          return { payment_id: outcome.payment.id, status: outcome.payment.status, failure_reason: outcome.payment.failureReason };
        }
        case 'secrets reseal': {
          const report = await resealSecrets(orm.em, secrets());
          if (report.unreadable.length > 0) process.exitCode = 1;
          return report;
        }
        default:
          return keys.list(id('merchant'));
      }
    });
  } finally {
    await orm.close(true);
    if (embedded) await embedded.stop();
  }
}

run(process.argv.slice(2)).then(
  (result) => {
    process.stdout.write(`${JSON.stringify(result)}\n`);
    process.exit(process.exitCode ?? 0);
  },
  (err: Error) => {
    if (err instanceof HelpRequested) {
      process.stdout.write(`${err.message}\n`);
      process.exit(0);
    }
    const usage = err instanceof UsageError || err instanceof ConfigError;
    const message = usage || err instanceof DomainError ? err.message : `admin failed: ${err.message}`;
    process.stderr.write(`${message}\n`);
    process.exit(usage ? 64 : 1);
  },
);
