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
 * Yields every item from `firstPage` on, fetching the next page when the current one is used up.
 * Lists are newest first, so items created while iterating shift later pages: an id already
 * yielded is skipped rather than repeated.
 */
export async function* paginate<T extends { id: string }>(fetchPage: (page: number) => Promise<Page<T>>, firstPage = 1): AsyncGenerator<T, void, undefined> {
  const seen = new Set<string>();
  for (let page = firstPage; ; page++) {
    const { data, meta } = await fetchPage(page);
    for (const item of data) {
      if (seen.has(item.id)) continue;
      seen.add(item.id);
      yield item;
    }
    if (data.length === 0 || meta.page * meta.page_size >= meta.total) return;
  }
}
