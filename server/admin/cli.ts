/**
 * Admin CLI (outside the public API): merchants and API keys.
 *   npm run admin -- merchant create --name NAME
 *   npm run admin -- key create --merchant ID --scopes a,b,c
 *   npm run admin -- key revoke --id KEYID
 *   npm run admin -- key list --merchant ID
 * Prints JSON on stdout; errors go to stderr with a non-zero exit.
 */
import path from 'node:path';
import { parseArgs } from 'node:util';
import { RequestContext } from '@mikro-orm/core';
import pg from 'pg';
import { loadConfig } from '../config/config.js';
import { resolveEncryptionKey } from '../config/encryption-key.js';
import { ApiKeyService, parseScopes } from '../domain/auth/api-key.service.js';
import { SecretBox } from '../domain/crypto/secret-box.js';
import { DomainError } from '../domain/errors.js';
import { MerchantService } from '../domain/merchants/merchant.service.js';
import { runningEmbeddedUrl, startEmbeddedPostgres, type EmbeddedDatabase } from '../persistence/embedded-postgres.js';
import { migrate, openOrm } from '../persistence/orm.js';
import { withSchemaLock } from '../persistence/schema-lock.js';

const USAGE = `usage:
  admin merchant create --name NAME
  admin key create --merchant ID --scopes a,b,c
  admin key revoke --id KEYID
  admin key list --merchant ID`;

class UsageError extends Error {}

async function reachable(url: string): Promise<boolean> {
  const client = new pg.Client({ connectionString: url, connectionTimeoutMillis: 2000 });
  try {
    await client.connect();
    await client.end();
    return true;
  } catch {
    return false;
  }
}

function required(values: Record<string, string | undefined>, name: string): string {
  const value = values[name];
  if (!value) throw new UsageError(`--${name} is required\n${USAGE}`);
  return value;
}

async function run(argv: string[]): Promise<unknown> {
  const { positionals, values } = parseArgs({
    args: argv,
    allowPositionals: true,
    options: { name: { type: 'string' }, merchant: { type: 'string' }, scopes: { type: 'string' }, id: { type: 'string' } },
  });
  const [resource, action] = positionals;
  const command = `${resource ?? ''} ${action ?? ''}`;
  if (!['merchant create', 'key create', 'key revoke', 'key list'].includes(command)) throw new UsageError(USAGE);

  const config = loadConfig();
  let embedded: EmbeddedDatabase | null = null;
  let databaseUrl = config.databaseUrl;
  if (!databaseUrl) {
    const dir = path.join(config.dataDir, 'postgres');
    const running = await runningEmbeddedUrl(dir);
    if (running && (await reachable(running))) databaseUrl = running;
    else {
      embedded = await startEmbeddedPostgres(dir);
      databaseUrl = embedded.url;
    }
  }
  const orm = await openOrm(databaseUrl, 2);
  try {
    await withSchemaLock(databaseUrl, () => migrate(orm));
    const secrets = new SecretBox(await resolveEncryptionKey(config));
    return await RequestContext.create(orm.em, async () => {
      const keys = new ApiKeyService(orm.em);
      const uuid = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/i;
      const id = (name: string) => {
        const value = required(values, name);
        if (!uuid.test(value)) throw new UsageError(`--${name} must be a UUID`);
        return value;
      };
      switch (command) {
        case 'merchant create': {
          const merchant = await new MerchantService(orm.em, secrets, config.webhookAllowPrivateUrls).create(required(values, 'name'));
          return { merchant_id: merchant.id, name: merchant.name };
        }
        case 'key create':
          return keys.issue(id('merchant'), parseScopes(required(values, 'scopes')));
        case 'key revoke':
          return keys.revoke(id('id'));
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
    process.exit(0);
  },
  (err: Error) => {
    const message = err instanceof UsageError || err instanceof DomainError ? err.message : `admin failed: ${err.message}`;
    process.stderr.write(`${message}\n`);
    process.exit(err instanceof UsageError ? 64 : 1);
  },
);
