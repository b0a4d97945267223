import { api } from '../api.js';
import { announce } from '../nav.js';
import { errorBox, field, h, mount, table } from '../dom.js';

/** Webhook URL and secret rotation (the secret is shown once), and the stored provider credentials, masked. */
export function settingsView() {
  const errors = h('div');
  const secretSlot = h('div', { 'aria-live': 'polite' });
  const url = h('input', { name: 'webhook_url', type: 'url', required: true, placeholder: 'https://shop.example.com/payments/webhook' });
  const credentials = h('div', {}, h('p', { class: 'muted' }, 'Loading…'));

  // The URL the service has: Rotate re-registers it, never an edit in the field that was not saved.
  let savedUrl = null;
  const save = h('button', { type: 'submit', class: 'primary' }, 'Save URL and issue a secret');
  const rotate = h('button', {
    type: 'button',
    class: 'danger',
    onclick: () => {
      if (!savedUrl) return mount(errors, errorBox({ code: 'VALIDATION_ERROR', message: 'Register a webhook URL first.' }));
      const unsaved = url.value.trim() !== savedUrl ? ` The URL stays ${savedUrl}: your edit is not saved (Save does that).` : '';
      if (window.confirm(`Rotate the signing secret? Deliveries are signed with the new secret at once; update your receiver.${unsaved}`)) register(savedUrl, 'rotate');
    },
  }, 'Rotate secret');

  // One registration at a time, as Refund and Capture: each issues a new secret, and of two sent at once
  // only the one stored last signs deliveries, so the other secret shown would be useless.
  let inFlight = false;
  const register = async (webhookUrl, verb) => {
    if (inFlight) return;
    inFlight = true;
    save.disabled = true;
    rotate.disabled = true;
    mount(errors);
    try {
      const { data } = await api('PUT', '/v1/merchant/webhook', { body: { webhook_url: webhookUrl } });
      savedUrl = data.webhook_url;
      if (verb === 'save') url.value = data.webhook_url; // a rotation leaves an unsaved edit in the field
      const secret = h('input', { readonly: true, value: data.webhook_secret, 'aria-label': 'New signing secret' });
      mount(secretSlot, h('div', { class: 'panel' },
        h('p', {}, h('strong', {}, 'Copy the signing secret now: it is shown only once. '),
          'Deliveries are signed with it from now on (X-Payments-Signature and the Standard Webhooks webhook-signature).'),
        h('div', { class: 'secret' }, secret,
          h('button', { type: 'button', onclick: async () => { secret.select(); await navigator.clipboard?.writeText(secret.value).catch(() => undefined); announce('Secret copied.'); } }, 'Copy'))));
      announce(verb === 'rotate' ? 'Signing secret rotated.' : 'Webhook URL saved.');
    } catch (err) {
      mount(errors, errorBox(err));
    } finally {
      inFlight = false;
      save.disabled = false;
      rotate.disabled = false;
    }
  };

  const form = h('form', {
    onsubmit: (e) => {
      e.preventDefault();
      register(url.value.trim(), 'save');
    },
  },
  field('Webhook URL', url),
  h('div', { class: 'actions spaced' }, save, rotate));

  (async () => {
    try {
      const { data } = await api('GET', '/v1/merchant');
      savedUrl = data.webhook_url ?? null;
      url.value = data.webhook_url ?? '';
    } catch (err) {
      mount(errors, errorBox(err));
    }
    try {
      const { data } = await api('GET', '/v1/merchant/credentials');
      mount(credentials, table([
        { label: 'Provider', cell: (c) => c.provider },
        { label: 'Stored values (masked)', cell: (c) => h('ul', {}, Object.entries(c.config_summary).map(([k, v]) => h('li', {}, h('code', {}, k), ': ', h('code', {}, v)))) },
      ], data));
    } catch (err) {
      mount(credentials, errorBox(err));
    }
  })();

  return h('section', {},
    h('h1', {}, 'Settings'),
    errors,
    h('h2', {}, 'Webhook'),
    h('div', { class: 'panel' }, form, secretSlot),
    h('h2', {}, 'Provider credentials'),
    h('p', { class: 'muted' }, 'Secrets are stored encrypted and never shown: only the last four characters of a longer one.'),
    credentials);
}
