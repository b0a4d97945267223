export interface BoundedOptions<T> {
  /** Items of one lane run one after another, in their order, never two at once (by default each item is its own lane). */
  laneOf?: (item: T) => string;
  /** Asked before each item: once it says stop, no further item is started (those under way finish). */
  shouldStop?: () => boolean;
}

/**
 * Runs `fn` on every item, at most `limit` at a time. An item whose `fn` throws goes to `onError` and the
 * others carry on. Returns how many threw.
 */
export async function forEachBounded<T>(
  items: readonly T[],
  limit: number,
  fn: (item: T) => Promise<void>,
  onError: (item: T, err: Error) => void,
  { laneOf, shouldStop = () => false }: BoundedOptions<T> = {},
): Promise<{ failed: number }> {
  const lanes = laneOf ? inLanes(items, laneOf) : items.map((item) => [item]);
  let next = 0;
  let failed = 0;
  const worker = async (): Promise<void> => {
    while (next < lanes.length) {
      const lane = lanes[next++]!;
      for (const item of lane) {
        if (shouldStop()) return;
        await fn(item).catch((err: Error) => {
          failed++;
          onError(item, err);
        });
      }
    }
  };
  await Promise.all(Array.from({ length: Math.min(limit, lanes.length) }, worker));
  return { failed };
}

/** The items grouped by lane, lanes in the order of their first item. */
function inLanes<T>(items: readonly T[], laneOf: (item: T) => string): T[][] {
  const lanes = new Map<string, T[]>();
  for (const item of items) {
    const key = laneOf(item);
    const lane = lanes.get(key);
    if (lane) lane.push(item);
    else lanes.set(key, [item]);
  }
  return [...lanes.values()];
}
