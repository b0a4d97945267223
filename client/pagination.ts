/** Walks page-numbered lists (`{ data, meta: { page, page_size, total } }`) one item at a time. */

export interface PageMeta {
  page: number;
  page_size: number;
  total: number;
}

export interface Page<T> {
  data: T[];
  meta: PageMeta;
}

/**
 * How many of the ids it yielded paginate remembers (the latest ones; a UUID costs about 100 bytes here, so at most about 10 MB).
 * Lists are newest first, so items created while iterating push later items down: an item already yielded
 * comes back on a later page once that many places further down. It is skipped while its id is still
 * remembered, i.e. unless PAGINATE_REMEMBERED_IDS or more items were yielded after it — which takes that many
 * items created during the walk. Bounded, so a walk over millions of rows does not keep every id.
 */
export const PAGINATE_REMEMBERED_IDS = 100_000;

/**
 * Yields every item from `firstPage` on, fetching the next page when the current one is used up.
 * Lists are newest first, so items created while iterating shift later pages: an item pushed onto a later
 * page is skipped rather than repeated, as long as fewer than {@link PAGINATE_REMEMBERED_IDS} (100,000)
 * items were yielded after it — a repeat takes 100,000 or more items created during the walk.
 */
export async function* paginate<T extends { id: string }>(fetchPage: (page: number) => Promise<Page<T>>, firstPage = 1): AsyncGenerator<T, void, undefined> {
  /** The ids yielded, the latest PAGINATE_REMEMBERED_IDS of them: `order` is a ring, oldest at `next` once full. */
  const remembered = new Set<string>();
  const order: string[] = [];
  let next = 0;
  const remember = (id: string) => {
    if (order.length < PAGINATE_REMEMBERED_IDS) {
      order.push(id);
    } else {
      remembered.delete(order[next]!);
      order[next] = id;
      next = (next + 1) % PAGINATE_REMEMBERED_IDS;
    }
    remembered.add(id);
  };
  for (let page = firstPage; ; page++) {
    const { data, meta } = await fetchPage(page);
    for (const item of data) {
      if (remembered.has(item.id)) continue;
      remember(item.id);
      yield item;
    }
    if (data.length === 0 || meta.page * meta.page_size >= meta.total) return;
  }
}
