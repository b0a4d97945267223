import type { QueryResult } from '@mikro-orm/core';
import type { EntityManager } from '@mikro-orm/postgresql';
import type { SecretBox } from './secret-box.js';

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

export type SecretKeyCensus = Record<ReturnType<SecretBox['keyOf']>, number>;

/**
 * How many stored secrets each kind of key sealed (one aggregate over the sealed forms' first two
 * parts; nothing is decrypted). `unknown` > 0: some secrets open with none of this process's keys —
 * a rotation whose old key left DECRYPTION_KEYS too early, or a process started with the wrong key.
 */
export async function censusOfSecretKeys(em: EntityManager, secrets: SecretBox): Promise<SecretKeyCensus> {
  const sealed = Object.values(SEALED_COLUMNS).map(({ table, column }) => `SELECT ${column} AS sealed FROM ${table} WHERE ${column} IS NOT NULL`).join(' UNION ALL ');
  const rows = await em.getConnection().execute<{ version: string; key_id: string; n: number }[]>(
    `SELECT split_part(sealed, '.', 1) AS version, split_part(sealed, '.', 2) AS key_id, count(*)::int AS n FROM (${sealed}) s GROUP BY 1, 2`,
  );
  const census: SecretKeyCensus = { current: 0, decryption: 0, unknown: 0, unversioned: 0 };
  for (const row of rows) census[secrets.keyOf(row.version, row.key_id)] += Number(row.n);
  return census;
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
