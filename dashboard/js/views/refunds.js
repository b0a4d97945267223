import { api } from '../api.js';
import { badge, errorBox, field, h, metadataList, mount, select, shortId, table, when } from '../dom.js';
import { dateInput, filterForm, filtersOf, pageOf, pager } from '../list.js';

const STATUSES = ['pending', 'completed', 'failed'];
const FILTERS = ['status', 'since', 'until'];
const PAGE_SIZE = 20;

/** Every refund of the merchant, newest first (GET /v1/refunds without payment_id): what is still pending, what failed and why. */
export function refundsView(query) {
  const results = h('div', { 'aria-live': 'polite' }, h('p', { class: 'muted' }, 'Loading…'));
  const form = filterForm('refunds', 'Filter refunds', FILTERS, [
    field('Status', select('status', [['', 'Any'], ...STATUSES.map((s) => [s, s])], query.get('status'))),
    field('Created after', dateInput('since', query)),
    field('Created before', dateInput('until', query)),
  ]);
  load(query, results);
  return h('section', {}, h('h1', {}, 'Refunds'), form, results);
}

async function load(query, results) {
  try {
    const { data, meta } = await api('GET', '/v1/refunds', { query: { ...filtersOf(query, FILTERS), page: pageOf(query), page_size: PAGE_SIZE } });
    mount(results,
      table([
        { label: 'Refund', cell: (r) => shortId(r.id) },
        { label: 'Created', cell: (r) => when(r.created_at) },
        { label: 'Payment', cell: (r) => h('a', { href: `#/payments/${r.payment_id}`, 'aria-label': `Payment ${r.payment_id}` }, shortId(r.payment_id)) },
        { label: 'Amount', class: 'num', cell: (r) => `${r.amount} ${r.currency}` },
        { label: 'Status', cell: (r) => badge(r.status) },
        { label: 'Provider reference', cell: (r) => (r.provider_ref ? h('code', {}, r.provider_ref) : '—') },
        { label: 'Failure reason', cell: (r) => r.failure_reason ?? '—' },
        { label: 'Metadata', cell: (r) => metadataList(r.metadata) },
      ], data),
      pager('refunds', query, meta, 'refund'));
  } catch (err) {
    mount(results, errorBox(err));
  }
}
