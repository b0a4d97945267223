/** How many rows one prune statement deletes, so no statement holds locks for long. */
export const PRUNE_BATCH = 1000;

/**
 * Runs a `DELETE … WHERE … IN (SELECT … LIMIT ${PRUNE_BATCH} FOR UPDATE SKIP LOCKED) RETURNING …`
 * statement again and again (each its own short transaction) until a run deletes less than a batch;
 * returns how many rows went in all.
 */
export async function deleteInBatches(run: () => Promise<unknown[]>): Promise<number> {
  let deleted = 0;
  for (;;) {
    const rows = await run();
    deleted += rows.length;
    if (rows.length < PRUNE_BATCH) return deleted;
  }
}
