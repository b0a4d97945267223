/**
 * Runs `fn` on every item, at most `limit` at a time. An item whose `fn` throws goes to `onError` and the
 * others carry on. Once `shouldStop` says so, no further item is started (those under way finish); the
 * items not started are returned. Returns how many threw.
 */
export async function forEachBounded<T>(
  items: readonly T[],
  limit: number,
  fn: (item: T) => Promise<void>,
  onError: (item: T, err: Error) => void,
  shouldStop: () => boolean = () => false,
): Promise<{ failed: number; notStarted: T[] }> {
  let next = 0;
  let failed = 0;
  const lane = async (): Promise<void> => {
    while (next < items.length && !shouldStop()) {
      const item = items[next++]!;
      await fn(item).catch((err: Error) => {
        failed++;
        onError(item, err);
      });
    }
  };
  await Promise.all(Array.from({ length: Math.min(limit, items.length) }, lane));
  return { failed, notStarted: items.slice(next) };
}
