// Tiny DOM helpers: text is always set as text (never parsed as HTML), so API data cannot inject markup.

/** h('a', { href: '#/x', class: 'y', onclick }, 'text', child, [more]) */
export function h(tag, attrs = {}, ...children) {
  const el = document.createElement(tag);
  for (const [name, value] of Object.entries(attrs ?? {})) {
    if (value === undefined || value === null || value === false) continue;
    if (name.startsWith('on') && typeof value === 'function') el.addEventListener(name.slice(2), value);
    else if (name === 'class') el.className = value;
    else if (value === true) el.setAttribute(name, '');
    else el.setAttribute(name, String(value));
  }
  append(el, children);
  return el;
}

function append(el, children) {
  for (const child of children.flat(Infinity)) {
    if (child === undefined || child === null || child === false) continue;
    el.append(child instanceof Node ? child : document.createTextNode(String(child)));
  }
}

/** Replaces an element's content. */
export function mount(el, ...children) {
  el.replaceChildren();
  append(el, children);
  return el;
}

export const badge = (value) => h('span', { class: `badge ${value}` }, String(value));

export function when(iso) {
  if (!iso) return '—';
  const d = new Date(iso);
  return h('time', { datetime: iso, title: iso }, d.toLocaleString(undefined, { dateStyle: 'medium', timeStyle: 'medium' }));
}

export const shortId = (id) => h('code', { title: id }, `${id.slice(0, 8)}…`);

/** A table that becomes stacked cards on narrow screens: each cell is labelled by its column. */
export function table(columns, rows, caption) {
  return h('div', { class: 'table-wrap' },
    h('table', { class: 'stack' },
      caption ? h('caption', { class: 'muted caption' }, caption) : null,
      h('thead', {}, h('tr', {}, columns.map((c) => h('th', { scope: 'col' }, c.label)))),
      h('tbody', {}, rows.length === 0
        ? h('tr', {}, h('td', { colspan: columns.length, 'data-label': '' }, 'Nothing to show.'))
        : rows.map((row) => h('tr', {}, columns.map((c) => h('td', { 'data-label': c.label, class: c.class }, c.cell(row))))))));
}

/** The API's error envelope, readable: message, each field's issue, and the request id for support. */
export function errorBox(err) {
  const details = err?.details ?? [];
  return h('div', { class: 'error', role: 'alert' },
    h('strong', {}, err?.code && err.code !== 'HTTP_ERROR' ? `${err.code}: ` : 'Error: '), err?.message ?? String(err),
    details.length ? h('ul', {}, details.map((d) => h('li', {}, h('code', {}, d.field), ` ${d.issue}`))) : null,
    err?.mayHaveActed ? h('p', {}, 'This may have been done already. Trying again is safe: it sends the same request (the same Idempotency-Key), which is never done twice.') : null,
    err?.requestId ? h('div', { class: 'rid' }, `Request id: ${err.requestId}`) : null);
}

/** A label wrapping its control, so every input has an accessible name. */
export const field = (label, control) => h('label', {}, label, control);

export function select(name, options, value) {
  return h('select', { name }, options.map(([v, text]) => h('option', { value: v, selected: v === (value ?? '') }, text)));
}

/** The merchant's own pairs by key, as text (h() never parses markup); — when none. */
export function metadataList(metadata) {
  const pairs = Object.entries(metadata ?? {}).sort(([a], [b]) => (a < b ? -1 : 1));
  return pairs.length === 0 ? '—' : h('ul', { class: 'metadata' }, pairs.map(([key, value]) => h('li', {}, h('code', {}, key), ' ', value)));
}
