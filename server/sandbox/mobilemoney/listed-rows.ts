import type { NextFunction, Request, Response, Router } from 'express';
import type { EntityManager } from '@mikro-orm/postgresql';
import type { SandboxDeps } from '../module.js';
import { isShortcode } from './wire.js';

type Row = Record<string, unknown>;

/**
 * Rows Daraja's pull lists that the simulator's own payments never make — no receipt, a date or amount it
 * cannot read ("1,000.00"), a negative amount, another transaction type — so a test can rehearse a pull
 * that meets them. `POST /_control/pull-rows {"shortcode": "600400", "pages": [[row, …], [row, …]]}`: the
 * pull of that shortcode lists these rows, exactly as given, page after page (OffSetValue counting every
 * row) in every window, and the shortcode's own payments after them; `"pages": []` removes them. Kept in
 * sandbox_mobilemoney_listed_rows, as every simulator state: any process serving the simulator lists them.
 */
async function storeListedRows(em: EntityManager, shortcode: string, pages: Row[][]): Promise<void> {
  if (pages.length === 0) {
    await em.getConnection().execute('DELETE FROM sandbox_mobilemoney_listed_rows WHERE shortcode = ?', [shortcode]);
    return;
  }
  await em.getConnection().execute(
    `INSERT INTO sandbox_mobilemoney_listed_rows (shortcode, pages) VALUES (?, ?::jsonb)
     ON CONFLICT (shortcode) DO UPDATE SET pages = EXCLUDED.pages`,
    [shortcode, JSON.stringify(pages)],
  );
}

/** The listed rows of `shortcode` from `offset` to the end of their page (none past the last), and how many are listed in all. */
export async function listedRowsAt(em: EntityManager, shortcode: string, offset: number): Promise<{ rows: Row[]; total: number }> {
  const [stored] = await em.getConnection().execute<{ pages: Row[][] }[]>('SELECT pages FROM sandbox_mobilemoney_listed_rows WHERE shortcode = ?', [shortcode]);
  const pages = stored?.pages ?? [];
  const total = pages.reduce((n, page) => n + page.length, 0);
  let start = 0;
  for (const page of pages) {
    if (offset < start + page.length) return { rows: page.slice(offset - start), total };
    start += page.length;
  }
  return { rows: [], total };
}

const isRow = (value: unknown): value is Row => typeof value === 'object' && value !== null && !Array.isArray(value);

export function mountListedRows(router: Router, deps: Pick<SandboxDeps, 'em'>): void {
  router.post('/_control/pull-rows', async (req: Request, res: Response, next: NextFunction) => {
    try {
      const { shortcode, pages } = (req.body ?? {}) as { shortcode?: unknown; pages?: unknown };
      if (typeof shortcode !== 'string' || !isShortcode(shortcode)) {
        res.status(400).json({ error: 'shortcode must be a shortcode (5 to 7 digits)' });
        return;
      }
      if (!Array.isArray(pages) || !pages.every((page) => Array.isArray(page) && page.length > 0 && page.every(isRow))) {
        res.status(400).json({ error: 'pages must be a list of non-empty lists of row objects' });
        return;
      }
      await storeListedRows(deps.em, shortcode, pages as Row[][]);
      res.json({ provider: 'mobilemoney', shortcode, rows: pages.reduce((n: number, page: Row[]) => n + page.length, 0) });
    } catch (err) {
      next(err);
    }
  });
}
