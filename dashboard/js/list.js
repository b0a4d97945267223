// What the list pages share: filters kept in the address (#/<route>?…, so Back and reload keep them), and the pager.
import { errorBox, h, mount } from './dom.js';
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

/**
 * A list shown on a page of its own kind (a payment's refunds, events and deliveries): the first page the
 * API answered (`first`: { data, meta }), then "Show N more" asks for the next page (`nextPage(page)`) and
 * adds it below, until all `meta.total` are shown. A row already shown (one that moved to a later page
 * while reading: something new came first) is not shown twice. `draw(rows)` makes the table.
 */
export function growingList(first, nextPage, draw, one, many = `${one}s`) {
  const rows = [...first.data];
  const seen = new Set(rows.map((r) => r.id));
  let meta = first.meta;
  const box = h('div');
  const problem = h('div');
  const show = () => {
    const left = Math.max(0, meta.total - rows.length);
    const next = Math.min(left, meta.page_size);
    mount(box,
      draw(rows),
      left > 0
        ? h('nav', { class: 'pager', 'aria-label': `More ${many}` },
          h('span', {}, `Showing ${rows.length} of ${meta.total} ${meta.total === 1 ? one : many}`),
          h('button', { type: 'button', onclick: more }, `Show ${next} more ${next === 1 ? one : many}`))
        : null,
      problem);
  };
  const more = async (e) => {
    // Kept before awaiting: once the handler has awaited, e.currentTarget is null.
    const button = e.currentTarget;
    button.disabled = true;
    mount(problem);
    try {
      const answer = await nextPage(meta.page + 1);
      for (const row of answer.data) {
        if (seen.has(row.id)) continue;
        seen.add(row.id);
        rows.push(row);
      }
      // A page that added nothing new (the list shrank meanwhile) ends the list where it is.
      meta = answer.data.length === 0 ? { ...answer.meta, total: rows.length } : answer.meta;
    } catch (err) {
      mount(problem, errorBox(err));
      button.disabled = false;
      return;
    }
    show();
  };
  show();
  return box;
}
