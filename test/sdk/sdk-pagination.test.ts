import { describe, expect, it } from '@jest/globals';
import { paginate, type Page } from '../../client/index.js';

/**
 * listAll's walk (paginate) over a fake fetchPage: synthetic pages, no service. A list is newest first,
 * so items created while it is walked push everything down and an item comes back at the top of the
 * next page; paginate must not yield it twice, and must not keep every id it ever yielded to know that.
 */
const PAGE_SIZE = 100;
const item = (n: number) => ({ id: `item-${String(n).padStart(7, '0')}` });

async function collect<T extends { id: string }>(pages: AsyncGenerator<T>): Promise<string[]> {
  const ids: string[] = [];
  for await (const { id } of pages) ids.push(id);
  return ids;
}

describe('paginate (listAll)', () => {
  it('skips an item pushed across a page boundary, over thousands of pages', async () => {
    // One item created before each page after the first is fetched: page n begins with the last item of page n-1.
    const pages = 3_000;
    const total = pages * PAGE_SIZE;
    const fetchPage = async (page: number): Promise<Page<{ id: string }>> => {
      const start = (page - 1) * PAGE_SIZE - (page - 1);
      return { data: Array.from({ length: PAGE_SIZE }, (_, i) => item(start + i)), meta: { page, page_size: PAGE_SIZE, total } };
    };
    const ids = await collect(paginate(fetchPage));
    expect(ids).toHaveLength(total - (pages - 1));
    expect(new Set(ids).size).toBe(ids.length);
    expect(ids[0]).toBe(item(0).id);
    expect(ids.at(-1)).toBe(item(total - pages).id);

    // Pushed down further than one page (more items created than a page holds): still not repeated.
    const far = async (page: number): Promise<Page<{ id: string }>> => {
      const start = page === 4 ? PAGE_SIZE : (page - 1) * PAGE_SIZE; // page 4 repeats page 2 whole
      return { data: Array.from({ length: PAGE_SIZE }, (_, i) => item(start + i)), meta: { page, page_size: PAGE_SIZE, total: 6 * PAGE_SIZE } };
    };
    const farIds = await collect(paginate(far));
    expect(new Set(farIds).size).toBe(farIds.length);
    expect(farIds).toHaveLength(5 * PAGE_SIZE);
  });

  it('remembers only the last few pages: an id from long ago is not kept', async () => {
    // The first item comes back on page 50 (it could only do so if the list were edited, not by being pushed down).
    // A walk that still skips it is holding every id it yielded: 5 000 here, a million for a full export.
    const fetchPage = async (page: number): Promise<Page<{ id: string }>> => {
      const data = Array.from({ length: PAGE_SIZE }, (_, i) => item((page - 1) * PAGE_SIZE + i));
      if (page === 50) data[0] = item(0);
      return { data, meta: { page, page_size: PAGE_SIZE, total: 60 * PAGE_SIZE } };
    };
    const ids = await collect(paginate(fetchPage));
    expect(ids.filter((id) => id === item(0).id)).toHaveLength(2);
    expect(ids).toHaveLength(60 * PAGE_SIZE);
  });
});
