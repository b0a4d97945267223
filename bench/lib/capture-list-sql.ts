import { RequestContext } from '@mikro-orm/core';
import { MikroORM } from '@mikro-orm/postgresql';
import type { ListPaymentsQuery } from '../../contract/index.js';
import { PaymentService } from '../../server/domain/payments/payment.service.js';
import { ormOptions } from '../../server/persistence/orm.js';

/**
 * The exact SQL `PaymentService.list` sends for a query (its find and its count), captured from
 * MikroORM's query log with the parameters inlined, so the benchmark can EXPLAIN ANALYZE what the
 * service really runs rather than a hand-written look-alike.
 */
export async function captureListSql(databaseUrl: string, merchantId: string, queries: ListPaymentsQuery[]): Promise<{ page: string; count: string }[]> {
  let captured: string[] = [];
  const orm = await MikroORM.init({
    ...ormOptions(databaseUrl, 2),
    debug: ['query', 'query-params'],
    colors: false,
    logger: (message: string) => captured.push(message),
  });
  try {
    // Only `list` is used: it needs nothing but the entity manager.
    const service = new PaymentService(orm.em as never, null as never, null as never, null as never, null as never, null as never, null as never);
    const out: { page: string; count: string }[] = [];
    for (const q of queries) {
      captured = [];
      await RequestContext.create(orm.em, () => service.list(merchantId, q));
      // The two run concurrently, so the log order varies.
      const sql = captured.map((m) => m.replace(/^\[query\]\s*/, '').replace(/\s*\[took [^\]]*\]\s*$/, '').trim()).filter((m) => /^select/i.test(m));
      const count = sql.find((m) => /^select count\(/i.test(m));
      const page = sql.find((m) => !/^select count\(/i.test(m));
      if (!count || !page) throw new Error(`expected a page and a count query, captured: ${sql.join(' ; ')}`);
      out.push({ page, count });
    }
    return out;
  } finally {
    await orm.close();
  }
}
