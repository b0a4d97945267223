import { api } from '../api.js';
import { announce, go } from '../nav.js';
import { errorBox, field, h, mount, select } from '../dom.js';
import { deliveryTable } from './delivery-list.js';

const STATUSES = ['pending', 'delivered', 'retrying', 'dead'];
const EVENT_TYPES = ['payment.completed', 'payment.failed', 'payment.refunded', 'payment.reversed', 'refund.failed', 'webhook.test'];
const PAGE_SIZE = 20;

const localNow = (offsetMs = 0) => {
  const d = new Date(Date.now() - offsetMs);
  return new Date(d.getTime() - d.getTimezoneOffset() * 60_000).toISOString().slice(0, 16);
};

/** The delivery log (GET /v1/webhooks/logs) with attempts and resend, recovery of a window, and a test event. */
export function deliveriesView(query) {
  const errors = h('div');
  const results = h('div', { 'aria-live': 'polite' }, h('p', { class: 'muted' }, 'Loading…'));
  const refresh = () => load(query, results, errors);

  const filters = h('form', {
    class: 'filters',
    'aria-label': 'Filter deliveries',
    onsubmit: (e) => {
      e.preventDefault();
      const data = new FormData(filters);
      go('deliveries', new URLSearchParams(['status', 'event_type', 'payment_id'].map((n) => [n, String(data.get(n) ?? '').trim()])));
    },
  },
  field('Status', select('status', [['', 'Any'], ...STATUSES.map((s) => [s, s])], query.get('status'))),
  field('Event type', select('event_type', [['', 'Any'], ...EVENT_TYPES.map((t) => [t, t])], query.get('event_type'))),
  field('Payment id', h('input', { name: 'payment_id', value: query.get('payment_id') ?? '', placeholder: 'uuid' })),
  h('div', { class: 'actions' },
    h('button', { type: 'submit', class: 'primary' }, 'Apply filters'),
    h('button', { type: 'button', onclick: () => go('deliveries') }, 'Clear')));

  const testOutcome = h('div', { 'aria-live': 'polite' });
  const testButton = h('button', {
    type: 'button',
    onclick: async () => {
      testButton.disabled = true;
      mount(errors);
      try {
        const { data } = await api('POST', '/v1/webhooks/test', { body: {} });
        mount(testOutcome, h('p', { class: data.delivered ? 'ok' : 'error' },
          data.delivered ? 'Test event delivered: ' : 'Test event failed: ',
          data.response_status === null ? 'no response' : `HTTP ${data.response_status}`,
          ` in ${data.duration_ms} ms`, data.error ? ` (${data.error})` : '', ` → ${data.url}`));
        await refresh();
      } catch (err) {
        mount(errors, errorBox(err));
      } finally {
        testButton.disabled = false;
      }
    },
  }, 'Send test event');

  const since = h('input', { name: 'since', type: 'datetime-local', required: true, value: localNow(24 * 3_600_000) });
  const until = h('input', { name: 'until', type: 'datetime-local' });
  const recover = h('form', {
    class: 'actions',
    'aria-label': 'Recover failed deliveries',
    onsubmit: async (e) => {
      e.preventDefault();
      mount(errors);
      try {
        const body = { since: new Date(since.value).toISOString(), ...(until.value ? { until: new Date(until.value).toISOString() } : {}) };
        const { data } = await api('POST', '/v1/webhooks/recover', { body });
        announce(`${data.queued} failed deliver${data.queued === 1 ? 'y' : 'ies'} queued again.`);
        await refresh();
      } catch (err) {
        mount(errors, errorBox(err));
      }
    },
  },
  field('Failed since (at most 7 days ago)', since),
  field('Until (optional)', until),
  h('button', { type: 'submit' }, 'Recover failed deliveries'));

  refresh();
  return h('section', {},
    h('h1', {}, 'Webhook deliveries'),
    errors,
    h('div', { class: 'panel' }, h('h2', { class: 'first' }, 'Endpoint tools'), h('div', { class: 'actions' }, testButton), testOutcome, recover),
    h('h2', {}, 'Delivery log'),
    filters,
    results);
}

async function load(query, results, errors) {
  const page = Math.max(1, Number(query.get('page') ?? 1) || 1);
  try {
    const { data, meta } = await api('GET', '/v1/webhooks/logs', {
      query: { status: query.get('status'), event_type: query.get('event_type'), payment_id: query.get('payment_id'), page, page_size: PAGE_SIZE },
    });
    const pages = Math.max(1, Math.ceil(meta.total / meta.page_size));
    const turn = (to) => {
      const next = new URLSearchParams(query);
      next.set('page', String(to));
      go('deliveries', next);
    };
    mount(results,
      deliveryTable(data, () => load(query, results, errors), errors),
      h('nav', { class: 'pager', 'aria-label': 'Pages' },
        h('button', { type: 'button', disabled: page <= 1, onclick: () => turn(page - 1) }, 'Previous page'),
        h('span', {}, `Page ${meta.page} of ${pages} · ${meta.total} deliver${meta.total === 1 ? 'y' : 'ies'}`),
        h('button', { type: 'button', disabled: page >= pages, onclick: () => turn(page + 1) }, 'Next page')));
  } catch (err) {
    mount(results, errorBox(err));
  }
}
