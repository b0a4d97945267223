/** How many rows one prune statement deletes, so no statement holds locks for long. */
export const PRUNE_BATCH = 1000;

/**
 * Runs a prune's one-batch statement again and again (each its own short transaction) until a run
 * deletes less than a batch; returns how many rows went in all.
 *
 * A batch statement is written `DELETE FROM t WHERE id = ANY(ARRAY(SELECT id FROM t WHERE … LIMIT
 * ${PRUNE_BATCH} FOR UPDATE SKIP LOCKED)) RETURNING …`: the subquery picks and locks the batch through
 * the index its condition names, and the ids, an array, are deleted through the primary key. Never
 * `WHERE id IN (SELECT …)`: PostgreSQL may plan that semi-join as a hash of the batch against a
 * sequential scan of the whole table, every batch (test/foundation/lookup-indexes.test.ts). A table whose
 * primary key has two columns (no array of it can be searched in its index) names the batch's rows by
 * `ctid` instead, deleted by a TID scan: the subquery's row locks keep them in place until the statement ends.
 */
export async function deleteInBatches(run: () => Promise<unknown[]>): Promise<number> {
  let deleted = 0;
  for (;;) {
    const rows = await run();
    deleted += rows.length;
    if (rows.length < PRUNE_BATCH) return deleted;
  }
}
