// The Models page: the deployment's model catalogue with what agents did with each model (calls,
// failures, median latency, tokens, spend), a form that adds one (tested first unless told not
// to), and per model a test and a remove. A refusal is shown as the server gave it.
import { api, button, errorView, fill, h, num, when } from './dom.js';

const roles = ['agent', 'oversight', 'validator', 'mini', 'task', 'embedder'];

const yesNo = (v) => (v === null || v === undefined ? 'unknown' : v ? 'yes' : 'no');

/** A test's findings in one line. */
function testText(t) {
  if (!t) return 'not tested';
  if (!t.ok) return `FAILED: ${t.error ?? 'no answer'}`;
  return `ok in ${t.latencyMs} ms · JSON ${yesNo(t.jsonReply)} · tools ${yesNo(t.toolCalls)} · context ${t.contextLength ?? 'not reported'}`;
}

const tokens = (n) => (n >= 1_000_000 ? `${num(n / 1_000_000, 1)}M` : n >= 1000 ? `${num(n / 1000, 1)}k` : String(n));
const usd = (x) => `$${x > 0 && x < 0.01 ? x.toPrecision(2) : x.toFixed(2)}`;

function addForm(after) {
  const field = (name, attrs) => h('input', { name, id: `model-${name}`, autocomplete: 'off', ...attrs });
  const name = field('name', { placeholder: 'name (a slug)', size: 14, required: true });
  const provider = h(
    'select',
    { name: 'provider', id: 'model-provider' },
    ['openai', 'anthropic'].map((p) => h('option', { value: p }, p)),
  );
  const model = field('model', { placeholder: 'model id on the server', size: 20, required: true });
  const baseUrl = field('baseUrl', { placeholder: 'base URL (default: the provider’s API)', size: 32 });
  const keyEnv = field('apiKeyEnv', { placeholder: 'key variable NAME, e.g. OPENAI_API_KEY', size: 26 });
  const role = h(
    'select',
    { name: 'role', id: 'model-role' },
    roles.map((r) => h('option', { value: r }, r === 'mini' ? 'mini (emotion + novelty)' : r)),
  );
  const priceIn = field('priceInPer1m', { type: 'number', min: 0, step: 'any', placeholder: '$ / 1M in', size: 8 });
  const priceOut = field('priceOutPer1m', { type: 'number', min: 0, step: 'any', placeholder: '$ / 1M out', size: 8 });
  const test = h('input', { type: 'checkbox', name: 'test', id: 'model-test', checked: true });
  const result = h('div', { class: 'result', id: 'model-result', 'aria-live': 'polite' });
  const form = h(
    'form',
    { class: 'model-add', id: 'model-form' },
    h('h2', {}, 'Add a model'),
    h('div', {}, name, ' ', provider, ' ', model, ' ', role),
    h('div', {}, baseUrl, ' ', keyEnv),
    h(
      'div',
      {},
      priceIn,
      ' ',
      priceOut,
      ' ',
      h('label', {}, test, ' test it first'),
      ' ',
      h('button', { type: 'submit', id: 'model-add' }, 'add'),
    ),
    h(
      'p',
      { class: 'muted' },
      'The key itself is never stored: name the environment variable that holds it in the process serving this page.',
    ),
    result,
  );
  form.addEventListener('submit', async (e) => {
    e.preventDefault();
    const text = (el) => el.value.trim();
    const price = (el) => (el.value === '' ? undefined : Number(el.value));
    const body = {
      name: text(name),
      provider: provider.value,
      model: text(model),
      ...(text(baseUrl) ? { baseUrl: text(baseUrl) } : {}),
      ...(text(keyEnv) ? { apiKeyEnv: text(keyEnv) } : {}),
      role: role.value,
      ...(price(priceIn) !== undefined ? { priceInPer1m: price(priceIn) } : {}),
      ...(price(priceOut) !== undefined ? { priceOutPer1m: price(priceOut) } : {}),
      test: test.checked,
    };
    fill(result, test.checked ? 'testing…' : 'adding…');
    try {
      const { model: m } = await api('/api/models', { method: 'POST', body });
      fill(result, h('span', { class: 'ok', 'data-model': m.name }, `added ${m.name}: ${testText(m.test)}`));
      form.reset();
      after();
    } catch (err) {
      fill(result, errorView(err));
    }
  });
  return form;
}

/** The catalogue: one row per model, with its test and remove. */
export function modelsView(root) {
  const body = h('tbody');
  const note = h('p', { class: 'muted', id: 'models-note' }, 'loading…');
  async function load() {
    try {
      const { models } = await api('/api/models');
      fill(body, models.map(row));
      fill(
        note,
        models.length ? `${models.length} model${models.length === 1 ? '' : 's'}` : 'no models yet: add one below',
      );
    } catch (err) {
      fill(note, errorView(err));
    }
  }
  function row(m) {
    const result = h('td', { class: 'result' });
    const path = `/api/models/${encodeURIComponent(m.name)}`;
    const test = async () => {
      fill(result, 'testing…');
      try {
        const { model } = await api(`${path}/test`, { method: 'POST', body: {} });
        // The row is drawn again with the stored test; the answer stays beside it.
        await load();
        const cell = body.querySelector(`tr[data-model="${CSS.escape(m.name)}"] td.result`);
        if (cell) fill(cell, h('span', { class: model.test?.ok ? 'ok' : 'error' }, testText(model.test)));
      } catch (err) {
        fill(result, errorView(err));
      }
    };
    const remove = async () => {
      try {
        await api(path, { method: 'DELETE', body: {} });
        fill(result, 'removed');
        await load();
      } catch (err) {
        fill(result, errorView(err));
      }
    };
    return h(
      'tr',
      { 'data-model': m.name },
      h('td', {}, h('strong', {}, m.name)),
      h(
        'td',
        {},
        `${m.provider} ${m.model}`,
        m.baseUrl ? h('div', { class: 'muted' }, m.baseUrl) : null,
        m.apiKeyEnv ? h('div', { class: 'muted' }, `key: $${m.apiKeyEnv}`) : null,
      ),
      h('td', {}, m.role),
      h('td', {}, `${m.priceInPer1m} / ${m.priceOutPer1m}`),
      h('td', {}, m.contextWindow ?? '-'),
      h('td', { class: 'test' }, testText(m.test), m.testedAt ? h('div', { class: 'muted' }, when(m.testedAt)) : null),
      h('td', { class: 'calls' }, String(m.calls)),
      h('td', { class: 'failures' }, String(m.failures)),
      h('td', { class: 'p50' }, m.p50LatencyMs === null ? '-' : `${m.p50LatencyMs} ms`),
      h('td', { class: 'tokens' }, tokens(m.promptTokens + m.completionTokens)),
      h('td', { class: 'spend' }, usd(m.spendUsd)),
      h('td', { class: 'agents' }, m.agents.join(', ') || '-'),
      h(
        'td',
        {},
        button('test', test, { 'data-action': 'test' }),
        ' ',
        button('remove', remove, { 'data-action': 'remove' }),
      ),
      result,
    );
  }
  fill(
    root,
    h('h1', {}, 'Models'),
    h('p', { class: 'muted' }, 'Models added once by name; agents get them by name (their registry rows say which).'),
    note,
    h(
      'table',
      { class: 'models', id: 'models' },
      h(
        'thead',
        {},
        h(
          'tr',
          {},
          [
            'model',
            'provider and id',
            'role',
            '$ / 1M in / out',
            'context',
            'last test',
            'calls',
            'failed',
            'p50',
            'tokens',
            'spend',
            'agents',
            '',
            '',
          ].map((t) => h('th', {}, t)),
        ),
      ),
      body,
    ),
    h('p', {}, button('refresh', load)),
    addForm(load),
  );
  void load();
  return () => undefined;
}
