import { api, session } from './api.js';
import { errorBox, field, h, mount } from './dom.js';
import { announce, go } from './nav.js';
import { deliveriesView } from './views/deliveries.js';
import { paymentView } from './views/payment.js';
import { paymentsView } from './views/payments.js';
import { refundsView } from './views/refunds.js';
import { settingsView } from './views/settings.js';

const main = document.getElementById('main');

/** `#/payments?status=completed` → { path: ['payments'], query: URLSearchParams }. */
function currentRoute() {
  const [path, search] = window.location.hash.replace(/^#\/?/, '').split('?');
  return { path: (path ?? '').split('/').filter(Boolean).map(decodeURIComponent), query: new URLSearchParams(search ?? '') };
}

function signInView() {
  const key = h('input', { name: 'api_key', type: 'password', autocomplete: 'off', required: true, spellcheck: 'false', placeholder: 'pk_…' });
  const error = h('div');
  const form = h('form', {
    onsubmit: async (e) => {
      e.preventDefault();
      mount(error);
      const value = key.value.trim();
      try {
        await api('GET', '/v1/merchant', { key: value });
      } catch (err) {
        // A valid key without merchant:read may still use the pages its scopes allow.
        if (err.status !== 403) return mount(error, errorBox(err));
      }
      session.signIn(value);
      // Signed in where the address points (a bookmarked payment, #/settings); the payments list otherwise.
      const [where] = currentRoute().path;
      go(where && where !== 'signin' ? window.location.hash.replace(/^#\/?/, '') : 'payments');
    },
  },
  field('API key', key),
  h('p', { class: 'muted' }, 'The key is kept in this browser tab\'s session storage only (never in a cookie or local storage) and is sent as X-API-Key to the public API. Sign out when you are done: a tab the browser restores or duplicates keeps it.'),
  h('button', { type: 'submit', class: 'primary' }, 'Sign in'),
  error);
  return h('section', { class: 'signin' }, h('h1', {}, 'Sign in'), form);
}

async function renderHeader() {
  const signedIn = Boolean(session.key);
  document.getElementById('nav').hidden = !signedIn;
  document.getElementById('who').hidden = !signedIn;
  if (!signedIn) return;
  const name = document.getElementById('merchant-name');
  if (!name.textContent) {
    try {
      const { data } = await api('GET', '/v1/merchant');
      name.textContent = data.name;
    } catch {
      name.textContent = '';
    }
  }
}

async function render() {
  const { path, query } = currentRoute();
  await renderHeader();
  for (const link of document.querySelectorAll('#nav a')) {
    link.toggleAttribute('aria-current', link.getAttribute('href') === `#/${path[0] ?? ''}`);
    if (link.hasAttribute('aria-current')) link.setAttribute('aria-current', 'page');
  }
  let view;
  if (!session.key) view = signInView();
  else if (path[0] === 'payments' && path[1]) view = paymentView(path[1]);
  else if (path[0] === 'refunds') view = refundsView(query);
  else if (path[0] === 'deliveries') view = deliveriesView(query);
  else if (path[0] === 'settings') view = settingsView();
  else view = paymentsView(query);
  mount(main, view);
  document.title = `${main.querySelector('h1')?.textContent ?? 'Dashboard'} · Payments dashboard`;
  main.focus();
}

document.getElementById('sign-out').addEventListener('click', () => {
  session.signOut();
  document.getElementById('merchant-name').textContent = '';
  go('signin');
  announce('Signed out.');
});
window.addEventListener('hashchange', render);
render();
