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
 * How many pages' ids paginate remembers. Lists are newest first, so items created while iterating push
 * later items down: an item already yielded comes back only after being pushed across a page boundary,
 * onto one of the next pages. Remembering the last few pages catches that, and keeps memory bounded
 * (a few pages of ids, not every id of a million-row export).
 */
const REMEMBERED_PAGES = 3;

/**
 * Yields every item from `firstPage` on, fetching the next page when the current one is used up.
 * Lists are newest first, so items created while iterating shift later pages: an id seen on this page
 * or one of the three before it is skipped rather than repeated.
 */
export async function* paginate<T extends { id: string }>(fetchPage: (page: number) => Promise<Page<T>>, firstPage = 1): AsyncGenerator<T, void, undefined> {
  /** The ids of the last REMEMBERED_PAGES pages, oldest first. */
  const recent: Set<string>[] = [];
  for (let page = firstPage; ; page++) {
    const { data, meta } = await fetchPage(page);
    const onThisPage = new Set<string>();
    recent.push(onThisPage);
    if (recent.length > REMEMBERED_PAGES + 1) recent.shift();
    for (const item of data) {
      const repeated = recent.some((ids) => ids.has(item.id));
      // Every id on the page, repeated or not: the window follows the list's positions.
      onThisPage.add(item.id);
      if (!repeated) yield item;
    }
    if (data.length === 0 || meta.page * meta.page_size >= meta.total) return;
  }
}
