import { api } from '../api.js';
import { go } from '../nav.js';
import { badge, errorBox, field, h, mount, select, shortId, table, when } from '../dom.js';

const STATUSES = ['pending', 'completed', 'failed', 'refunded', 'reversed'];
const PROVIDERS = ['cardpay', 'mobilemoney', 'walletpay'];
const FILTERS = ['status', 'provider', 'currency', 'min_amount', 'max_amount', 'since', 'until', 'search'];
const PAGE_SIZE = 20;

/** `2026-11-22T10:15` (datetime-local, the viewer's time) ↔ ISO 8601 for the API. */
const toIso = (local) => (local ? new Date(local).toISOString() : '');
function toLocal(iso) {
  if (!iso) return '';
  const d = new Date(iso);
  return Number.isNaN(d.getTime()) ? '' : new Date(d.getTime() - d.getTimezoneOffset() * 60_000).toISOString().slice(0, 16);
}

/** The payments list: every filter of GET /v1/payments, kept in the address so Back and reload keep them. */
export function paymentsView(query) {
  const results = h('div', { 'aria-live': 'polite' }, h('p', { class: 'muted' }, 'Loading…'));
  const input = (name, attrs = {}) => h('input', { name, value: query.get(name) ?? '', ...attrs });
  const form = h('form', {
    class: 'filters',
    'aria-label': 'Filter payments',
    onsubmit: (e) => {
      e.preventDefault();
      const data = new FormData(form);
      const next = new URLSearchParams();
      for (const name of FILTERS) {
        let value = String(data.get(name) ?? '').trim();
        if (name === 'since' || name === 'until') value = toIso(value);
        if (value) next.set(name, value);
      }
      go('payments', next);
    },
  },
  field('Status', select('status', [['', 'Any'], ...STATUSES.map((s) => [s, s])], query.get('status'))),
  field('Provider', select('provider', [['', 'Any'], ...PROVIDERS.map((p) => [p, p])], query.get('provider'))),
  field('Currency', input('currency', { maxlength: 3, placeholder: 'USD', autocapitalize: 'characters' })),
  field('Min amount', input('min_amount', { inputmode: 'decimal', placeholder: '0.00' })),
  field('Max amount', input('max_amount', { inputmode: 'decimal', placeholder: '0.00' })),
  field('Created from', h('input', { name: 'since', type: 'datetime-local', value: toLocal(query.get('since')) })),
  field('Created before', h('input', { name: 'until', type: 'datetime-local', value: toLocal(query.get('until')) })),
  field('Receipt or idempotency key', input('search', { placeholder: 'exact value' })),
  h('div', { class: 'actions' },
    h('button', { type: 'submit', class: 'primary' }, 'Apply filters'),
    h('button', { type: 'button', onclick: () => go('payments') }, 'Clear')));

  load(query, results);
  return h('section', {}, h('h1', {}, 'Payments'), form, results);
}

async function load(query, results) {
  const page = Math.max(1, Number(query.get('page') ?? 1) || 1);
  const params = Object.fromEntries(FILTERS.map((f) => [f, query.get(f) ?? '']));
  try {
    const { data, meta } = await api('GET', '/v1/payments', { query: { ...params, page, page_size: PAGE_SIZE } });
    const pages = Math.max(1, Math.ceil(meta.total / meta.page_size));
    const turn = (to) => {
      const next = new URLSearchParams(query);
      next.set('page', String(to));
      go('payments', next);
    };
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
      h('nav', { class: 'pager', 'aria-label': 'Pages' },
        h('button', { type: 'button', disabled: page <= 1, onclick: () => turn(page - 1) }, 'Previous page'),
        h('span', {}, `Page ${meta.page} of ${pages} · ${meta.total} payment${meta.total === 1 ? '' : 's'}`),
        h('button', { type: 'button', disabled: page >= pages, onclick: () => turn(page + 1) }, 'Next page')));
  } catch (err) {
    mount(results, errorBox(err));
  }
}
