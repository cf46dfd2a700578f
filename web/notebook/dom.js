// Building the page from data. Every text the server sends (an agent's reply, a note, a reason)
// becomes a text node, never HTML: `h` has no way to set innerHTML, and an attribute named on…
// is refused, so nothing an agent writes can run in the page.

const svgNs = 'http://www.w3.org/2000/svg';

/** Append children: strings and numbers as text nodes, null/false skipped, arrays flattened. */
function append(el, children) {
  for (const c of children.flat(Infinity)) {
    if (c === null || c === undefined || c === false) continue;
    el.append(c instanceof Node ? c : document.createTextNode(String(c)));
  }
  return el;
}

function setAttrs(el, attrs) {
  for (const [k, v] of Object.entries(attrs ?? {})) {
    if (v === null || v === undefined || v === false) continue;
    if (/^on/i.test(k))
      throw new Error(`event handlers are attached with .addEventListener, not as the attribute ${k}`);
    if (k === 'dataset') Object.assign(el.dataset, v);
    else el.setAttribute(k, v === true ? '' : String(v));
  }
}

/** An HTML element: h('p', {class: 'x'}, 'text', child…). */
export function h(tag, attrs, ...children) {
  const el = document.createElement(tag);
  setAttrs(el, attrs);
  return append(el, children);
}

/** An SVG element (inline pictures). */
export function s(tag, attrs, ...children) {
  const el = document.createElementNS(svgNs, tag);
  setAttrs(el, attrs);
  return append(el, children);
}

/** Replace an element's children. */
export function fill(el, ...children) {
  el.replaceChildren();
  return append(el, children);
}

/** A button that runs `fn` on click, disabled while it runs. */
export function button(label, fn, attrs = {}) {
  const b = h('button', { type: 'button', ...attrs }, label);
  b.addEventListener('click', async () => {
    b.disabled = true;
    try {
      await fn();
    } finally {
      b.disabled = false;
    }
  });
  return b;
}

/** An error the API answered: its message, and the fields at fault. */
export class ApiError extends Error {
  constructor(status, body) {
    super(body?.error ?? `HTTP ${status}`);
    this.status = status;
    this.fields = body?.fields ?? [];
  }
}

/** Call the notebook's API: JSON in, JSON out; an error answer throws an ApiError. */
export async function api(path, { method = 'GET', body } = {}) {
  const res = await fetch(path, {
    method,
    headers: body === undefined ? {} : { 'content-type': 'application/json' },
    body: body === undefined ? undefined : JSON.stringify(body),
    credentials: 'same-origin',
  });
  const text = await res.text();
  let json;
  try {
    json = text ? JSON.parse(text) : {};
  } catch {
    json = { error: text };
  }
  if (!res.ok) throw new ApiError(res.status, json);
  return json;
}

/** How an API error reads in the page: the message, then one line per field. */
export function errorView(err) {
  const fields = err instanceof ApiError ? err.fields : [];
  return h(
    'div',
    { class: 'error', role: 'alert' },
    h('strong', {}, err instanceof ApiError ? `refused (${err.status})` : 'failed'),
    fields.length ? null : `: ${err.message}`,
    fields.length
      ? h(
          'ul',
          {},
          fields.map((f) =>
            h('li', { class: 'field-error', 'data-field': f.field }, h('code', {}, f.field), ': ', f.message),
          ),
        )
      : null,
  );
}

/** A time as a person reads it, in their own zone. */
export function when(iso) {
  if (!iso) return '-';
  const d = new Date(iso);
  return Number.isNaN(d.getTime()) ? String(iso) : d.toLocaleString();
}

/** "3 h 02 min 10 s" until `iso` (or "… ago" once past). */
export function countdown(iso, now = Date.now()) {
  if (!iso) return 'no deadline';
  let ms = new Date(iso).getTime() - now;
  const past = ms < 0;
  ms = Math.abs(ms);
  const d = Math.floor(ms / 86_400_000);
  const hh = Math.floor((ms % 86_400_000) / 3_600_000);
  const mm = Math.floor((ms % 3_600_000) / 60_000);
  const ss = Math.floor((ms % 60_000) / 1000);
  const text = `${d ? `${d} d ` : ''}${d || hh ? `${hh} h ` : ''}${String(mm).padStart(2, '0')} min ${String(ss).padStart(2, '0')} s`;
  return past ? `deadline passed ${text} ago` : `${text} left`;
}

/** A number with at most `digits` decimals, or "-". */
export function num(x, digits = 2) {
  return x === null || x === undefined || Number.isNaN(x) ? '-' : String(Math.round(x * 10 ** digits) / 10 ** digits);
}

/** Who answers escalations and gates from this browser (recorded by the workflows). */
export function who() {
  return document.getElementById('who').value.trim() || 'human';
}

/**
 * Listen to the live feed (one agent's, or every agent's): `handlers[kind](event)` per event.
 * Returns the function that stops listening. The browser reconnects by itself after a drop.
 */
export function listen(agentId, handlers) {
  const source = new EventSource(`/api/events${agentId ? `?agent=${encodeURIComponent(agentId)}` : ''}`);
  for (const kind of ['beat', 'reply', 'verdict', 'escalation', 'learning', 'ready']) {
    source.addEventListener(kind, (m) => {
      const fn = handlers[kind];
      if (fn) fn(JSON.parse(m.data));
    });
  }
  const live = document.getElementById('live');
  source.addEventListener('open', () => live.classList.add('on'));
  source.addEventListener('error', () => live.classList.remove('on'));
  return () => source.close();
}
