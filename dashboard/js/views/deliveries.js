import { api } from '../api.js';
import { announce } from '../nav.js';
import { errorBox, field, h, mount, select } from '../dom.js';
import { filterForm, filtersOf, pageOf, pager } from '../list.js';
import { deliveryTable } from './delivery-list.js';

const STATUSES = ['pending', 'delivered', 'retrying', 'dead'];
const EVENT_TYPES = ['payment.completed', 'payment.failed', 'payment.refunded', 'payment.reversed', 'refund.failed', 'webhook.test'];
const FILTERS = ['status', 'event_type', 'payment_id'];
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

  const filters = filterForm('deliveries', 'Filter deliveries', FILTERS, [
    field('Status', select('status', [['', 'Any'], ...STATUSES.map((s) => [s, s])], query.get('status'))),
    field('Event type', select('event_type', [['', 'Any'], ...EVENT_TYPES.map((t) => [t, t])], query.get('event_type'))),
    field('Payment id', h('input', { name: 'payment_id', value: query.get('payment_id') ?? '', placeholder: 'uuid' })),
  ]);

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
  try {
    const { data, meta } = await api('GET', '/v1/webhooks/logs', { query: { ...filtersOf(query, FILTERS), page: pageOf(query), page_size: PAGE_SIZE } });
    mount(results,
      deliveryTable(data, () => load(query, results, errors), errors),
      pager('deliveries', query, meta, 'delivery', 'deliveries'));
  } catch (err) {
    mount(results, errorBox(err));
  }
}
