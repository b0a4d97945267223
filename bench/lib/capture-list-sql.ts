import { inOrmScope } from '../../server/persistence/orm-scope.js';
import { MikroORM } from '@mikro-orm/postgresql';
import type { ListPaymentsQuery } from '../../contract/index.js';
import { PaymentService } from '../../server/domain/payments/payment.service.js';
import { PaymentSchema } from '../../server/persistence/entities/index.js';
import { ormOptions } from '../../server/persistence/orm.js';

/**
 * The exact SQL `PaymentService.list` sends for a query (its find and its count), captured from
 * MikroORM's query log with the parameters inlined, so the benchmark can EXPLAIN ANALYZE what the
 * service really runs rather than a hand-written look-alike.
 */
export async function captureListSql(databaseUrl: string, merchantId: string, queries: ListPaymentsQuery[]): Promise<{ page: string; count: string; rowCount: string }[]> {
  let captured: string[] = [];
  const orm = await MikroORM.init({
    ...ormOptions(databaseUrl, 2),
    debug: ['query', 'query-params'],
    colors: false,
    logger: (message: string) => captured.push(message),
  });
  try {
    // Only `list` is used: it needs nothing but the entity manager.
    const service = new PaymentService(orm.em as never, null as never, null as never, null as never, null as never, null as never, null as never, null as never);
    const out: { page: string; count: string; rowCount: string }[] = [];
    for (const q of queries) {
      captured = [];
      await inOrmScope(orm.em, () => service.list(merchantId, q));
      // The two run concurrently, so the log order varies.
      const sql = captured.map((m) => m.replace(/^\[query\]\s*/, '').replace(/\s*\[took [^\]]*\]\s*$/, '').trim()).filter((m) => /^(select|with)/i.test(m));
      // The total is either a count(*) of the rows or, when the filter allows, a sum over payment_count_totals.
      const isCount = (m: string) => /^select count\(/i.test(m) || /from payment_count_totals/i.test(m);
      const count = sql.find(isCount);
      // A deep page is two statements: its ids from the week counts (WITH weeks …), then those rows; the first is the page's cost.
      const page = sql.find((m) => /^with weeks/i.test(m)) ?? sql.find((m) => !isCount(m));
      if (!count || !page) throw new Error(`expected a page and a count query, captured: ${sql.join(' ; ')}`);
      out.push({ page, count, rowCount: /from payment_count_totals/i.test(count) ? rowCountSql(orm.em, merchantId, q) : count });
    }
    return out;
  } finally {
    await orm.close();
  }
}

/** The count(*) the service would send for a filter the counters answer (what it sent before them). */
function rowCountSql(em: MikroORM['em'], merchantId: string, q: ListPaymentsQuery): string {
  const where: Record<string, string> = { merchantId };
  if (q.status) where.status = q.status;
  if (q.provider) where.provider = q.provider;
  if (q.currency) where.currency = q.currency.toUpperCase();
  return em.createQueryBuilder(PaymentSchema, 'p0').count().where(where).getFormattedQuery();
}
