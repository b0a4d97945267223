import { api } from '../api.js';
import { announce } from '../nav.js';
import { badge, errorBox, h, mount, shortId, table, when } from '../dom.js';

/** Loads a delivery's attempt history the first time its disclosure is opened. */
function attemptsDisclosure(delivery) {
  const body = h('div', {}, h('p', { class: 'muted' }, 'Loading…'));
  let loaded = false;
  return h('details', {
    ontoggle: async (e) => {
      if (!e.target.open || loaded) return;
      loaded = true;
      try {
        const { data } = await api('GET', `/v1/webhooks/logs/${delivery.id}`);
        mount(body, data.attempt_history.length === 0
          ? h('p', { class: 'muted' }, 'No attempt yet.')
          : h('ol', {}, data.attempt_history.map((a) => h('li', {},
            `${a.trigger} · `, a.response_status === null ? 'no response' : `HTTP ${a.response_status}`,
            ` · ${a.duration_ms} ms · `, when(a.created_at), a.error ? h('div', { class: 'muted' }, a.error) : null))));
      } catch (err) {
        loaded = false;
        mount(body, errorBox(err));
      }
    },
  }, h('summary', {}, `Attempts (${delivery.attempts})`), body);
}

/**
 * The delivery log as a table: status, last outcome, attempt history, and Resend for a dead or
 * retrying delivery (POST /v1/webhooks/logs/{id}/retry). `refresh` re-renders after a resend.
 */
export function deliveryTable(deliveries, refresh, errorSlot) {
  const resend = async (delivery, button) => {
    button.disabled = true;
    mount(errorSlot);
    try {
      const { data } = await api('POST', `/v1/webhooks/logs/${delivery.id}/retry`);
      announce(data.status === 'delivered'
        ? `Delivery ${delivery.id.slice(0, 8)} resent and delivered.`
        : `Delivery ${delivery.id.slice(0, 8)} resent: ${data.last_error ?? 'failed'}.`);
      await refresh();
    } catch (err) {
      button.disabled = false;
      mount(errorSlot, errorBox(err));
    }
  };
  return table([
    { label: 'Delivery', cell: (d) => shortId(d.id) },
    { label: 'Event', cell: (d) => d.event_type },
    { label: 'Payment', cell: (d) => (d.payment_id ? h('a', { href: `#/payments/${d.payment_id}` }, shortId(d.payment_id)) : '—') },
    { label: 'Status', cell: (d) => badge(d.status) },
    { label: 'Last answer', cell: (d) => (d.last_response_status === null ? (d.last_error ?? '—') : `HTTP ${d.last_response_status}`) },
    { label: 'Created', cell: (d) => when(d.created_at) },
    { label: 'Attempts', cell: (d) => attemptsDisclosure(d) },
    {
      label: 'Actions',
      cell: (d) => (d.status === 'dead' || d.status === 'retrying'
        ? h('button', { type: 'button', 'aria-label': `Resend delivery ${d.id}`, onclick: (e) => resend(d, e.currentTarget) }, 'Resend')
        : '—'),
    },
  ], deliveries);
}
