import { api } from '../api.js';
import { badge, errorBox, field, h, mount, select, shortId, table, when } from '../dom.js';
import { dateInput, filterForm, filtersOf, pageOf, pager } from '../list.js';

const STATUSES = ['pending', 'completed', 'failed', 'refunded', 'reversed'];
const PROVIDERS = ['cardpay', 'mobilemoney', 'walletpay'];
const FILTERS = ['status', 'provider', 'currency', 'min_amount', 'max_amount', 'since', 'until', 'search'];
const PAGE_SIZE = 20;

/** The payments list: every filter of GET /v1/payments, kept in the address so Back and reload keep them. */
export function paymentsView(query) {
  const results = h('div', { 'aria-live': 'polite' }, h('p', { class: 'muted' }, 'Loading…'));
  const input = (name, attrs = {}) => h('input', { name, value: query.get(name) ?? '', ...attrs });
  const form = filterForm('payments', 'Filter payments', FILTERS, [
    field('Status', select('status', [['', 'Any'], ...STATUSES.map((s) => [s, s])], query.get('status'))),
    field('Provider', select('provider', [['', 'Any'], ...PROVIDERS.map((p) => [p, p])], query.get('provider'))),
    field('Currency', input('currency', { maxlength: 3, placeholder: 'USD', autocapitalize: 'characters' })),
    field('Min amount', input('min_amount', { inputmode: 'decimal', placeholder: '0.00' })),
    field('Max amount', input('max_amount', { inputmode: 'decimal', placeholder: '0.00' })),
    field('Created after', dateInput('since', query)),
    field('Created before', dateInput('until', query)),
    field('Receipt or idempotency key', input('search', { placeholder: 'exact value' })),
  ]);
  load(query, results);
  return h('section', {}, h('h1', {}, 'Payments'), form, results);
}

async function load(query, results) {
  try {
    const { data, meta } = await api('GET', '/v1/payments', { query: { ...filtersOf(query, FILTERS), page: pageOf(query), page_size: PAGE_SIZE } });
    mount(results,
      table([
        { label: 'Payment', cell: (p) => h('a', { href: `#/payments/${p.id}`, 'aria-label': `Payment ${p.id}` }, shortId(p.id)) },
        { label: 'Created', cell: (p) => when(p.created_at) },
        { label: 'Provider', cell: (p) => p.provider },
        { label: 'Amount', class: 'num', cell: (p) => `${p.amount} ${p.currency}` },
        { label: 'Status', cell: (p) => badge(p.status) },
        { label: 'Refunded', class: 'num', cell: (p) => (p.amount_refunded === '0' || /^0(\.0+)?$/.test(p.amount_refunded) ? '—' : `${p.amount_refunded} ${p.currency}`) },
        { label: 'Idempotency key', cell: (p) => h('code', {}, p.idempotency_key) },
      ], data),
      pager('payments', query, meta, 'payment'));
  } catch (err) {
    mount(results, errorBox(err));
  }
}
