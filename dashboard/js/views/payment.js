import { api } from '../api.js';
import { announce } from '../nav.js';
import { badge, errorBox, field, h, metadataList, mount, shortId, table, when } from '../dom.js';
import { growingList } from '../list.js';
import { answered, forgetSettledRefund, idempotencyKeyFor, keptRefundMayBeSent } from '../request-keys.js';
import { deliveryTable } from './delivery-list.js';

/** A payment's refunds, events and deliveries are read a page at a time (the API's most); "Show more" reads on. */
const PAGE_SIZE = 100;

/** One payment: its summary, capture and refund, transitions, refunds, events and deliveries with attempts. */
export function paymentView(id) {
  const section = h('section', {}, h('p', {}, h('a', { href: '#/payments' }, '← All payments')), h('h1', {}, 'Payment'), h('p', { class: 'muted' }, 'Loading…'));
  render(id, section);
  return section;
}

/** Draws the payment's page into `section`; returns its error slot (each drawing has a new one) and the payment read. */
async function render(id, section) {
  const errors = h('div');
  let payment;
  try {
    ({ data: payment } = await api('GET', `/v1/payments/${encodeURIComponent(id)}`));
  } catch (err) {
    mount(section, h('p', {}, h('a', { href: '#/payments' }, '← All payments')), h('h1', {}, 'Payment'), errors, errorBox(err));
    return { errors };
  }
  const rerender = () => render(id, section);
  // Every refund, event and delivery of the payment, not only the first page: partial refunds have no limit.
  const pageOf = (path) => (page) => api('GET', path, { query: { payment_id: id, page, page_size: PAGE_SIZE } });
  const readRefunds = pageOf('/v1/refunds');
  const readEvents = pageOf('/v1/events');
  const readDeliveries = pageOf('/v1/webhooks/logs');
  const [transitions, refunds, events, deliveries] = await Promise.allSettled([
    // All on one page (the API answers every transition).
    api('GET', `/v1/payments/${id}/transitions`),
    readRefunds(1),
    readEvents(1),
    readDeliveries(1),
  ]);
  const part = (result, draw) => (result.status === 'fulfilled' ? draw(result.value.data) : errorBox(result.reason));
  const pagedPart = (result, read, draw, one, many) => (result.status === 'fulfilled' ? growingList(result.value, read, draw, one, many) : errorBox(result.reason));

  mount(section,
    h('p', {}, h('a', { href: '#/payments' }, '← All payments')),
    h('h1', {}, `Payment ${payment.amount} ${payment.currency}`),
    errors,
    h('div', { class: 'panel' }, h('dl', { class: 'summary' },
      row('Id', h('code', {}, payment.id)),
      row('Status', badge(payment.status)),
      row('Provider', payment.provider),
      row('Amount', `${payment.amount} ${payment.currency}`),
      row('Refunded', `${payment.amount_refunded} ${payment.currency}`),
      row('Provider reference', payment.provider_ref ? h('code', {}, payment.provider_ref) : '—'),
      row('Idempotency key', h('code', {}, payment.idempotency_key)),
      row('Reference', h('code', {}, payment.reference)),
      payment.failure_reason ? row('Failure reason', payment.failure_reason) : null,
      payment.next_action ? row('Next action', h('a', { href: payment.next_action.url, rel: 'noreferrer' }, payment.next_action.url)) : null,
      Object.keys(payment.metadata ?? {}).length > 0 ? row('Metadata', metadataList(payment.metadata)) : null,
      row('Created', when(payment.created_at)),
      row('Updated', when(payment.updated_at)))),
    actions(payment, errors, rerender),
    h('h2', {}, 'Transitions'),
    part(transitions, (rows) => table([
      { label: 'When', cell: (t) => when(t.created_at) },
      { label: 'Of', cell: (t) => (t.subject === 'refund' ? h('span', {}, 'refund ', shortId(t.refund_id)) : 'payment') },
      { label: 'From', cell: (t) => (t.from_status ? badge(t.from_status) : '—') },
      { label: 'To', cell: (t) => badge(t.to_status) },
      { label: 'Trigger', cell: (t) => h('code', {}, t.trigger) },
      { label: 'Applied', cell: (t) => (t.accepted ? 'yes' : `refused${t.note ? `: ${t.note}` : ''}`) },
    ], rows)),
    h('h2', {}, 'Refunds'),
    pagedPart(refunds, readRefunds, (rows) => table([
      { label: 'Refund', cell: (r) => shortId(r.id) },
      { label: 'Amount', class: 'num', cell: (r) => `${r.amount} ${r.currency}` },
      { label: 'Status', cell: (r) => badge(r.status) },
      { label: 'Reason', cell: (r) => r.failure_reason ?? '—' },
      { label: 'Metadata', cell: (r) => metadataList(r.metadata) },
      { label: 'Created', cell: (r) => when(r.created_at) },
    ], rows), 'refund'),
    h('h2', {}, 'Events'),
    pagedPart(events, readEvents, (rows) => table([
      { label: 'Event', cell: (e) => e.type },
      { label: 'Created', cell: (e) => when(e.created_at) },
      { label: 'Body', cell: (e) => h('details', {}, h('summary', {}, 'Show body'), h('pre', {}, JSON.stringify(e, null, 2))) },
    ], rows), 'event'),
    h('h2', {}, 'Webhook deliveries'),
    pagedPart(deliveries, readDeliveries, (rows) => deliveryTable(rows, rerender, errors), 'delivery', 'deliveries'));
  return { errors, payment };
}

const row = (label, value) => [h('dt', {}, label), h('dd', {}, value)];

const refundOutcome = ({ data, replayed }) => {
  const what = `${data.amount} ${data.currency}`;
  if (replayed) {
    return data.status === 'pending'
      ? `The earlier refund of ${what} is still pending until the provider confirms it; no second refund was made.`
      : `The earlier refund of ${what} is ${data.status}; no second refund was made. Refund again to make another.`;
  }
  return data.status === 'pending'
    ? `Refund of ${what} is pending until the provider confirms it. Refund again with this amount while it is pending shows it again; it is not refunded twice.`
    : `Refund of ${what} is ${data.status}.`;
};

/**
 * What a capture answered 200 means: the payment's status in the answer. Captured; held at the provider
 * (PayPal's PENDING capture: it completes or fails when it settles); or not captured, and why (an expired
 * order, a refusal for good: the payment read again has the reason). Returns [announcement, problem] — a
 * problem is shown as an error.
 */
const captureOutcome = (status, now) => {
  if (status === 'completed') return ['Payment captured.', null];
  if (status === 'pending') return ['Capture pending at the provider: the payment completes or fails when it settles.', null];
  return [null, { code: 'NOT_CAPTURED', message: `Payment not captured: ${now?.failure_reason ?? `the payment is ${status}`}.` }];
};

function actions(payment, errors, rerender) {
  const buttons = [];
  if (payment.status === 'pending' && payment.provider === 'walletpay') {
    buttons.push(h('button', {
      type: 'button',
      class: 'primary',
      onclick: async (e) => {
        e.currentTarget.disabled = true;
        mount(errors);
        let status = null;
        let problem = null;
        try {
          ({ data: { status } } = await api('POST', `/v1/payments/${payment.id}/capture`, { body: {}, idempotencyKey: idempotencyKeyFor('capture', payment.id) }));
          answered('capture', payment.id);
        } catch (err) {
          answered('capture', payment.id, err);
          problem = err;
        }
        // The page is redrawn first (the payment as it now is), then the outcome shown in its new error slot:
        // the old slot goes with the old drawing.
        const redrawn = await rerender();
        let said = null;
        if (status) [said, problem] = captureOutcome(status, redrawn.payment);
        if (said) announce(said);
        if (problem) mount(redrawn.errors, errorBox(problem));
      },
    }, 'Capture'));
  }
  if (payment.status === 'completed') {
    const amount = h('input', { name: 'amount', inputmode: 'decimal', placeholder: `all that remains (${payment.currency})` });
    buttons.push(h('form', {
      class: 'actions',
      'aria-label': 'Refund',
      onsubmit: async (e) => {
        e.preventDefault();
        const submit = e.currentTarget.querySelector('button');
        submit.disabled = true;
        mount(errors);
        try {
          const value = amount.value.trim();
          const body = { payment_id: payment.id, ...(value ? { amount: value } : {}) };
          await forgetSettledRefund(payment.id, body);
          if (!(await keptRefundMayBeSent(payment.id, body, payment.currency))) {
            submit.disabled = false;
            return;
          }
          const answer = await api('POST', '/v1/refunds', { body, idempotencyKey: idempotencyKeyFor('refund', payment.id, body) });
          answered('refund', payment.id, null, answer.data);
          announce(refundOutcome(answer));
          await rerender();
        } catch (err) {
          answered('refund', payment.id, err);
          submit.disabled = false;
          mount(errors, errorBox(err));
        }
      },
    }, field('Refund amount (empty = the rest)', amount), h('button', { type: 'submit', class: 'danger' }, 'Refund')));
  }
  return buttons.length ? h('div', { class: 'panel actions' }, buttons) : null;
}
