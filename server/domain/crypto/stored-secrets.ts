import type { QueryResult } from '@mikro-orm/core';
import type { EntityManager } from '@mikro-orm/postgresql';
import type { SealingKey, SecretBox } from './secret-box.js';

/** Every column that holds a secret sealed with ENCRYPTION_KEY, by the name the report gives it. */
const SEALED_COLUMNS = {
  provider_credentials: { table: 'provider_credentials', column: 'secrets_enc' },
  merchant_webhook_secrets: { table: 'merchants', column: 'webhook_secret_enc' },
} as const;

type SealedKind = keyof typeof SEALED_COLUMNS;

export interface ResealReport {
  /** Secrets re-encrypted under ENCRYPTION_KEY by this run. */
  resealed: Record<SealedKind, number>;
  /** Secrets that were under ENCRYPTION_KEY already. */
  already_current: number;
  /** Secrets no configured key opens (left as they are): which row, never what it holds. */
  unreadable: { table: string; id: string }[];
}

const BATCH = 500;

export type SecretKeyCensus = Record<SealingKey, number>;

/**
 * Every stored secret, grouped as SecretBox.keyOf reads them: a v2 value by the key id it names
 * (`v2.<key id>`, one group per key), any other (sealed before key ids) by itself, as it names no key.
 */
const CENSUS_SQL = `SELECT grouped AS sealed, count(*)::int AS n
  FROM (SELECT CASE WHEN sealed LIKE 'v2.%' THEN 'v2.' || split_part(sealed, '.', 2) ELSE sealed END AS grouped
          FROM (${Object.values(SEALED_COLUMNS).map(({ table, column }) => `SELECT ${column} AS sealed FROM ${table} WHERE ${column} IS NOT NULL`).join(' UNION ALL ')}) s) g
 GROUP BY grouped`;

/**
 * How many stored secrets each kind of key opens: at boot (its log line) and for the stored_secrets
 * gauge (each scrape round, at most every 5 s). `unknown` > 0: some secrets open with none of this
 * process's keys — a rotation whose old key left DECRYPTION_KEYS too early, or a process started with
 * the wrong key. One aggregate query; a v2 secret is counted by the key id it names (nothing is
 * decrypted), one sealed before key ids by the key that authenticates it — tried once per value and
 * process, not per round: which key opens a value never changes while the process's keys do not, so
 * what the last round found is kept for the values still stored (a resealed or replaced one is
 * dropped). A round decrypts only the values it has not seen before, and what it keeps is one entry
 * per v1 value still stored (none once they are resealed).
 */
export class StoredSecretsCensus {
  private known = new Map<string, SealingKey>();

  constructor(
    private readonly em: EntityManager,
    private readonly secrets: SecretBox,
  ) {}

  async take(): Promise<SecretKeyCensus> {
    const rows = await this.em.getConnection().execute<{ sealed: string; n: number }[]>(CENSUS_SQL);
    const census: SecretKeyCensus = { current: 0, decryption: 0, unknown: 0 };
    const known = new Map<string, SealingKey>();
    for (const row of rows) {
      const key = this.known.get(row.sealed) ?? this.secrets.keyOf(row.sealed);
      known.set(row.sealed, key);
      census[key] += Number(row.n);
    }
    this.known = known;
    return census;
  }
}

/**
 * The rotation's second step: every stored secret not yet under ENCRYPTION_KEY is opened (with
 * DECRYPTION_KEYS) and sealed again with ENCRYPTION_KEY, a row at a time, read in batches by id.
 * A row is written only if it still holds what was read, so a merchant storing new credentials
 * meanwhile keeps them; running it again reseals nothing more. Database work only: no other system
 * is called, and no transaction spans rows.
 */
export async function resealSecrets(em: EntityManager, secrets: SecretBox): Promise<ResealReport> {
  const report: ResealReport = { resealed: { provider_credentials: 0, merchant_webhook_secrets: 0 }, already_current: 0, unreadable: [] };
  const connection = em.getConnection();
  for (const kind of Object.keys(SEALED_COLUMNS) as SealedKind[]) {
    const { table, column } = SEALED_COLUMNS[kind];
    let after = '00000000-0000-0000-0000-000000000000';
    for (;;) {
      const rows = await connection.execute<{ id: string; sealed: string }[]>(
        `SELECT id, ${column} AS sealed FROM ${table} WHERE id > ? AND ${column} IS NOT NULL ORDER BY id LIMIT ${BATCH}`,
        [after],
      );
      for (const row of rows) {
        if (secrets.sealedWithCurrentKey(row.sealed)) {
          report.already_current += 1;
          continue;
        }
        let plaintext: string;
        try {
          plaintext = secrets.open(row.sealed);
        } catch {
          report.unreadable.push({ table, id: row.id });
          continue;
        }
        const updated = await connection.execute<QueryResult>(`UPDATE ${table} SET ${column} = ? WHERE id = ? AND ${column} = ?`, [secrets.seal(plaintext), row.id, row.sealed], 'run');
        report.resealed[kind] += updated.affectedRows;
      }
      if (rows.length < BATCH) break;
      after = rows[rows.length - 1]!.id;
    }
  }
  return report;
}
