import { describe, expect, it } from '@jest/globals';
import { paginate, PAGINATE_REMEMBERED_IDS, type Page } from '../../client/index.js';

/**
 * listAll's walk (paginate) over a fake fetchPage: synthetic pages, no service. A list is newest first,
 * so items created while it is walked push everything down and an item comes back at the top of the
 * next page; paginate must not yield it twice, and must not keep every id it ever yielded to know that (it keeps
 * the last PAGINATE_REMEMBERED_IDS).
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

  it('a burst of 400 new items between two page reads repeats nothing: 1,000 items, each yielded once', async () => {
    // Page size 100; after page 2 is read, 400 items are created (4 pages' worth): page 3 onwards now shows
    // items already yielded from pages 1 and 2, up to four pages further down.
    const size = 100;
    let list = Array.from({ length: 1_000 }, (_, n) => item(n));
    const fetchPage = async (page: number): Promise<Page<{ id: string }>> => {
      const data = list.slice((page - 1) * size, page * size);
      if (page === 2) list = [...Array.from({ length: 400 }, (_, n) => item(1_000 + n)), ...list];
      return { data, meta: { page, page_size: size, total: list.length } };
    };
    const ids = await collect(paginate(fetchPage));
    // Every one of the 1,000 once, plus the 200 new ones that landed on pages 3 and 4 (the newest 200 came
    // before the page the walk had reached, so it never sees them).
    expect(new Set(ids).size).toBe(ids.length);
    const old = ids.filter((id) => id < item(1_000).id);
    expect(old).toEqual(Array.from({ length: 1_000 }, (_, n) => item(n).id));
    expect(ids.filter((id) => id >= item(1_000).id)).toEqual(Array.from({ length: 200 }, (_, n) => item(1_200 + n).id));
  });

  it(`remembers the last ${PAGINATE_REMEMBERED_IDS} ids it yielded, not every id: one yielded longer ago than that may come back`, async () => {
    expect(PAGINATE_REMEMBERED_IDS).toBe(100_000);
    // Pages 1-1001 yield items 0-100,099; page 1002 begins with item 100 (99,999 ids were yielded after it:
    // still remembered, skipped), then item 99 (100,000 yielded after it: forgotten, yielded again).
    const pages = (PAGINATE_REMEMBERED_IDS + PAGE_SIZE) / PAGE_SIZE + 1;
    const fetchPage = async (page: number): Promise<Page<{ id: string }>> => {
      const data = Array.from({ length: PAGE_SIZE }, (_, i) => item((page - 1) * PAGE_SIZE + i));
      if (page === pages) data.splice(0, 2, item(100), item(99));
      return { data, meta: { page, page_size: PAGE_SIZE, total: pages * PAGE_SIZE } };
    };
    const ids = await collect(paginate(fetchPage));
    const count = (id: string) => ids.filter((x) => x === id).length;
    expect([count(item(99).id), count(item(100).id)]).toEqual([2, 1]);
    expect(ids).toHaveLength(pages * PAGE_SIZE - 1);
  });
});
