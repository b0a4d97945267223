// What the list pages share: filters kept in the address (#/<route>?…, so Back and reload keep them), and the pager.
import { h } from './dom.js';
import { go } from './nav.js';

/** `2026-11-22T10:15` (datetime-local, the viewer's time) ↔ ISO 8601 for the API. */
const toIso = (local) => (local ? new Date(local).toISOString() : '');
function toLocal(iso) {
  if (!iso) return '';
  const d = new Date(iso);
  return Number.isNaN(d.getTime()) ? '' : new Date(d.getTime() - d.getTimezoneOffset() * 60_000).toISOString().slice(0, 16);
}

/** A date-time filter (`since`, `until`) shown in the viewer's time, sent as ISO 8601. */
export const dateInput = (name, query) => h('input', { name, type: 'datetime-local', value: toLocal(query.get(name)) });

/** The filter form of a list: Apply puts `names` in the address; Clear drops them all. */
export function filterForm(route, label, names, fields) {
  const form = h('form', {
    class: 'filters',
    'aria-label': label,
    onsubmit: (e) => {
      e.preventDefault();
      const data = new FormData(form);
      const next = new URLSearchParams();
      for (const name of names) {
        let value = String(data.get(name) ?? '').trim();
        if (name === 'since' || name === 'until') value = toIso(value);
        if (value) next.set(name, value);
      }
      go(route, next);
    },
  },
  fields,
  h('div', { class: 'actions' },
    h('button', { type: 'submit', class: 'primary' }, 'Apply filters'),
    h('button', { type: 'button', onclick: () => go(route) }, 'Clear')));
  return form;
}

/** The page the address asks for (1 when none or not a number). */
export const pageOf = (query) => Math.max(1, Number(query.get('page') ?? 1) || 1);

/** The filters in the address, for the API (empty when absent). */
export const filtersOf = (query, names) => Object.fromEntries(names.map((name) => [name, query.get(name) ?? '']));

/** "Page 2 of 5 · 93 payments" between Previous and Next, which keep the filters. */
export function pager(route, query, meta, one, many = `${one}s`) {
  const pages = Math.max(1, Math.ceil(meta.total / meta.page_size));
  const turn = (to) => {
    const next = new URLSearchParams(query);
    next.set('page', String(to));
    go(route, next);
  };
  return h('nav', { class: 'pager', 'aria-label': 'Pages' },
    h('button', { type: 'button', disabled: meta.page <= 1, onclick: () => turn(meta.page - 1) }, 'Previous page'),
    h('span', {}, `Page ${meta.page} of ${pages} · ${meta.total} ${meta.total === 1 ? one : many}`),
    h('button', { type: 'button', disabled: meta.page >= pages, onclick: () => turn(meta.page + 1) }, 'Next page'));
}
