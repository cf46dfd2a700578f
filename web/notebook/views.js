// The agents list and one agent's page: its status and controls, the note box, its ticks (live,
// each expandable), its pictures, its memory, its agent file and its MCP servers.
import { agentFilePane } from './agent-file.js';
import { goalsView } from './goals.js';
import { mcpPane } from './mcp.js';
import { lineChart } from './charts.js';
import { api, button, errorView, fill, h, listen, num, when } from './dom.js';

const agentHref = (id) => `#/agent/${encodeURIComponent(id)}`;

/** What an exhausted agent needs to go on (the status's `exhausted.needs`): the smallest grant, limits, capacity. */
function needsText(n) {
  if (!n) return '';
  if (n.closed) return ': budget closed';
  const lf = (x) => `${Math.round(x * 10_000) / 10_000} LF`;
  const parts = [];
  if (n.grant > 0) parts.push(`needs a ${lf(n.grant)} grant`);
  if (n.daily !== null) parts.push(`daily limit must be ≥ ${lf(n.daily)}`);
  if (n.monthly !== null) parts.push(`monthly limit must be ≥ ${lf(n.monthly)}`);
  if (n.capacity !== null) parts.push(`capacity must be ≥ ${lf(n.capacity)}`);
  return parts.length ? `: ${parts.join('; ')}` : '';
}

function lifeforceText(lf) {
  if (!lf) return '-';
  const left =
    lf.available === null
      ? 'unlimited'
      : `${num(lf.available, 1)}${lf.capacity !== null ? ` / ${num(lf.capacity, 0)}` : ''} LF`;
  return `${left}${lf.lastCharge !== null && lf.lastCharge !== undefined ? ` (last tick ${num(lf.lastCharge, 2)})` : ''}${lf.exhausted ? ` EXHAUSTED${needsText(lf.needs)}` : ''}`;
}

function loopControls(agentId, after) {
  const result = h('span', { class: 'result' });
  const send = (signal) => async () => {
    try {
      await api(`/api/agents/${encodeURIComponent(agentId)}/${signal}`, { method: 'POST', body: {} });
      fill(result, `${signal} sent`);
      after?.();
    } catch (err) {
      fill(result, errorView(err));
    }
  };
  return h(
    'span',
    { class: 'controls' },
    ['pause', 'resume', 'stop'].map((s) => button(s, send(s), { class: `btn-${s}`, 'data-action': s })),
    result,
  );
}

function startForm(after) {
  const id = h('input', { name: 'agentId', placeholder: 'agent id', size: 14, required: true });
  const name = h('input', { name: 'name', placeholder: 'display name (optional)', size: 20 });
  const result = h('div', { class: 'result' });
  const form = h(
    'form',
    { class: 'start', id: 'start-form' },
    h('strong', {}, 'Start an agent '),
    id,
    ' ',
    name,
    ' ',
    h('button', { type: 'submit' }, 'start'),
    result,
  );
  form.addEventListener('submit', async (e) => {
    e.preventDefault();
    try {
      const r = await api('/api/agents', {
        method: 'POST',
        body: { agentId: id.value.trim(), ...(name.value.trim() ? { name: name.value.trim() } : {}) },
      });
      fill(result, `running as ${r.workflowId}`);
      after();
    } catch (err) {
      fill(result, errorView(err));
    }
  });
  return form;
}

/** Every agent: phase, mode, tick, LLM, lifeforce and last reply, kept current by the feed. */
export function agentsView(root) {
  const body = h('tbody');
  const note = h('p', { class: 'muted' }, 'loading…');
  const cells = new Map();
  async function load() {
    try {
      const { agents } = await api('/api/agents');
      cells.clear();
      fill(
        body,
        agents.map((a) => row(a)),
      );
      fill(
        note,
        agents.length ? `${agents.length} agent${agents.length === 1 ? '' : 's'}` : 'no agents yet: start one below',
      );
    } catch (err) {
      fill(note, errorView(err));
    }
  }
  function row(a) {
    const c = {
      phase: h(
        'td',
        { class: 'phase' },
        a.execution === 'RUNNING' ? `${a.phase ?? '?'}${a.paused ? ' (paused)' : ''}` : a.execution.toLowerCase(),
      ),
      tick: h('td', { class: 'tick' }, String(a.tick)),
      llm: h('td', { class: 'llm' }, a.llm ?? '-'),
      lf: h('td', { class: 'lifeforce' }, lifeforceText(a.lifeforce)),
      last: h('td', { class: 'last' }, a.last ? a.last.summary : '-'),
      capacity: a.lifeforce?.capacity ?? null,
    };
    cells.set(a.id, c);
    return h(
      'tr',
      { 'data-agent': a.id },
      h('td', {}, h('a', { href: agentHref(a.id) }, a.name), h('div', { class: 'muted' }, a.id)),
      c.phase,
      h('td', {}, a.mode),
      c.tick,
      c.llm,
      c.lf,
      c.last,
      h(
        'td',
        {},
        loopControls(a.id, () => setTimeout(load, 800)),
      ),
    );
  }
  const stop = listen(undefined, {
    beat(e) {
      const c = cells.get(e.agentId);
      if (!c || e.loop !== 'main') return;
      fill(c.tick, String(e.tick));
      if (e.model) fill(c.llm, e.model);
      if (e.lifeforce)
        fill(
          c.lf,
          lifeforceText({ available: e.lifeforce.available, capacity: c.capacity, lastCharge: e.lifeforce.charged }),
        );
    },
    reply(e) {
      const c = cells.get(e.agentId);
      if (c) fill(c.last, e.summary);
    },
  });
  fill(
    root,
    h('h1', {}, 'Agents'),
    note,
    h(
      'table',
      { class: 'agents', id: 'agents' },
      h(
        'thead',
        {},
        h(
          'tr',
          {},
          ['agent', 'phase', 'mode', 'tick', 'LLM', 'lifeforce', 'last reply', ''].map((t) => h('th', {}, t)),
        ),
      ),
      body,
    ),
    h('p', {}, button('refresh', load)),
    startForm(load),
  );
  void load();
  return stop;
}

// ---- one agent ----------------------------------------------------------------------------------

function statusLine(r) {
  const s = r.loop?.status;
  if (!s)
    return h(
      'p',
      { class: 'status' },
      r.loop?.error ?? `loop ${r.loop?.execution?.status ?? 'unknown'}: ${r.loop?.queryError ?? ''}`,
    );
  const x = r.loop.execution;
  return h(
    'dl',
    { class: 'status', id: 'status' },
    [
      ['loop', x.status === 'RUNNING' ? `${s.phase}${s.paused ? ' (paused)' : ''}` : `${x.status}: ${x.reason ?? ''}`],
      ['tick', String(s.tick)],
      ['mode', s.operatingMode],
      ['LLM', s.llm ?? '-'],
      [
        'lifeforce',
        lifeforceText(
          s.lifeforce
            ? { ...s.lifeforce, exhausted: s.lifeforce.exhausted !== null, needs: s.lifeforce.exhausted?.needs }
            : null,
        ),
      ],
      ['last reply', s.last ? s.last.summary : '-'],
      [
        'validation',
        s.lastVerdict
          ? `${s.lastVerdict.validationMode}${s.lastVerdict.rating === null ? '' : ` rating ${num(s.lastVerdict.rating)}`}`
          : '-',
      ],
      [
        'commands',
        `${s.counters.commandsApplied} applied, ${s.counters.commandsUnvalidated} unvalidated, ${s.counters.commandsRejected} rejected`,
      ],
      // Only once the embedder was away: the line says since when and why, or since when it is back.
      ...(r.embedder ? [['embedder', r.embedder.line]] : []),
    ].map(([k, v]) => [h('dt', {}, k), h('dd', { 'data-key': k }, v)]),
  );
}

function noteBox(agentId) {
  const text = h('textarea', {
    id: 'note-text',
    name: 'text',
    rows: 3,
    placeholder: 'a note for the agent: it reads it at its next tick',
  });
  const priority = h('input', { id: 'note-priority', name: 'priority', type: 'number', value: '1', size: 3 });
  const tags = h('input', { id: 'note-tags', name: 'tags', placeholder: 'tags, comma separated', size: 20 });
  const result = h('div', { class: 'result', id: 'note-result', 'aria-live': 'polite' });
  const form = h(
    'form',
    { id: 'note-form', class: 'note' },
    text,
    h(
      'div',
      {},
      h('label', {}, 'priority ', priority),
      ' ',
      tags,
      ' ',
      h('button', { type: 'submit', id: 'note-send' }, 'send note'),
    ),
    result,
  );
  form.addEventListener('submit', async (e) => {
    e.preventDefault();
    const body = {
      text: text.value,
      priority: priority.value === '' ? undefined : Number(priority.value),
      tags: tags.value
        .split(',')
        .map((t) => t.trim())
        .filter(Boolean),
    };
    try {
      const r = await api(`/api/agents/${encodeURIComponent(agentId)}/notes`, { method: 'POST', body });
      fill(
        result,
        h(
          'span',
          { class: 'ok', 'data-note-id': r.noteId ?? '' },
          r.queued ? `queued: ${r.message}` : r.noteId !== null ? `note #${r.noteId} delivered` : 'note taken',
        ),
      );
      text.value = '';
    } catch (err) {
      fill(result, errorView(err));
    }
  });
  return form;
}

const kindLabel = {
  applied: 'applied',
  unvalidated: 'unvalidated',
  held: 'held',
  rejected: 'rejected',
  error: 'error',
};

function tickSummary(t) {
  const counts = Object.entries(t.commands)
    .filter(([, n]) => n > 0)
    .map(([k, n]) => `${n} ${kindLabel[k]}`)
    .join(', ');
  return h(
    'summary',
    {},
    h('span', { class: 'tick-no' }, `tick ${t.tick}`),
    h(
      'span',
      { class: 'chip' },
      t.rating === null ? (t.validationMode ?? 'no verdict yet') : `rating ${t.rating > 0 ? '+' : ''}${num(t.rating)}`,
    ),
    h('span', { class: 'chip' }, `novelty ${num(t.novelty, 0)}`),
    counts ? h('span', { class: 'chip' }, counts) : null,
    t.stagnation ? h('span', { class: 'chip warn' }, 'stagnating') : null,
    h('span', { class: 'muted' }, when(t.createdAt)),
    h('span', { class: 'tick-text' }, t.summary.length > 180 ? `${t.summary.slice(0, 180)}…` : t.summary),
  );
}

const json = (v) => h('pre', { class: 'json' }, JSON.stringify(v, null, 2));

function commandsTable(rows, empty) {
  if (!rows.length) return h('p', { class: 'muted' }, empty);
  return h(
    'table',
    { class: 'commands' },
    h(
      'thead',
      {},
      h(
        'tr',
        {},
        ['cmd', 'type', 'outcome', 'why', 'rating', 'args'].map((x) => h('th', {}, x)),
      ),
    ),
    h(
      'tbody',
      {},
      rows.map((c) =>
        h(
          'tr',
          { class: `cmd ${c.kind}` },
          h('td', {}, c.cmdId),
          h('td', {}, c.type),
          h('td', { class: 'kind' }, c.kind),
          h('td', {}, c.reason ?? ''),
          h('td', {}, c.rating === null || c.rating === undefined ? '' : `${num(c.rating)} / ≥ ${num(c.threshold)}`),
          h('td', {}, json(c.args)),
        ),
      ),
    ),
  );
}

/** One message of a tick's prompt, folded open but for the system message (the long, stable part). */
function promptMessage(m) {
  const size =
    m.chars === undefined
      ? `${m.content.length} characters`
      : `first ${m.content.length} of ${m.chars} characters (the rest was not stored)`;
  return h(
    'details',
    { class: 'prompt-message', 'data-role': m.role, open: m.role !== 'system' },
    h('summary', {}, h('span', { class: 'role' }, m.role), h('span', { class: 'muted' }, ` — ${size}`)),
    h('pre', { class: 'prompt-text' }, m.content),
  );
}

/** What the tick's model was given: the exact messages when they were stored, else what the records show of them. */
function contextView(d) {
  const p = d.context.prompt;
  const shown = p
    ? [
        h('h4', {}, 'Prompt (the messages the model was sent)'),
        h('p', { class: 'muted' }, `${p.chars} characters, ${p.promptTokens} prompt tokens as the model counted them`),
        h('div', { class: 'prompt' }, p.messages.map(promptMessage)),
      ]
    : [
        h('h4', {}, 'Context (as the records show it)'),
        h(
          'p',
          { class: 'muted' },
          'This tick’s prompt was not stored, so what it carried is rebuilt from the rows that record it.',
        ),
        h('h5', {}, `notes read at this tick (${d.context.notes.length})`),
        d.context.notes.length
          ? h(
              'ul',
              { class: 'notes-read' },
              d.context.notes.map((n) =>
                h(
                  'li',
                  { 'data-note': n.id },
                  h(
                    'span',
                    { class: 'muted' },
                    `#${n.id} ${n.source}${n.sender ? ` (${n.sender})` : ''} p${n.priority}: `,
                  ),
                  h('span', { class: 'note-text' }, n.text),
                ),
              ),
            )
          : h('p', { class: 'muted' }, 'none'),
        h('h5', {}, `results of tick ${d.context.previousTick}'s commands`),
        commandsTable(d.context.previousResults, 'none'),
      ];
  return h(
    'section',
    { class: 'context' },
    shown,
    h('h5', {}, 'model calls'),
    d.calls.length
      ? h(
          'ul',
          { class: 'calls' },
          d.calls.map((c) =>
            h(
              'li',
              {},
              `${c.purpose ?? '?'}: ${c.provider ?? ''}:${c.model} ${c.ok ? 'ok' : `failed (${c.error ?? ''})`}, ${c.promptTokens} → ${c.completionTokens} tokens${c.latencyMs !== null ? `, ${c.latencyMs} ms` : ''}`,
            ),
          ),
        )
      : h('p', { class: 'muted' }, 'none recorded'),
  );
}

function tickDetail(d) {
  const r = d.reply;
  const votes = r.validators ?? [];
  return h(
    'div',
    { class: 'tick-detail' },
    contextView(d),
    h(
      'section',
      {},
      h('h4', {}, 'Reply'),
      h('pre', { class: 'reply' }, r.content),
      r.reflection ? h('p', {}, h('em', {}, 'reflection: '), r.reflection) : null,
      r.parseError ? h('p', { class: 'error' }, `parse error: ${r.parseError}`) : null,
    ),
    h('section', {}, h('h4', {}, 'Commands'), commandsTable(d.commands, 'no commands')),
    h(
      'section',
      {},
      h(
        'h4',
        {},
        `Validators — ${r.validationMode ?? 'no verdict'}${r.rating === null ? '' : `, rating ${num(r.rating)}`}`,
      ),
      votes.length
        ? h(
            'table',
            { class: 'votes' },
            h(
              'tbody',
              {},
              votes.map((v) =>
                h(
                  'tr',
                  {},
                  h('td', {}, v.name, v.self ? ' (self)' : ''),
                  h('td', {}, v.rating === undefined ? (v.status ?? '-') : num(v.rating)),
                  h('td', {}, `trust ${num(v.trust)}`),
                  h('td', {}, v.comment ?? ''),
                ),
              ),
            ),
          )
        : h('p', { class: 'muted' }, 'no validator votes'),
    ),
    h(
      'section',
      {},
      h('h4', {}, 'Emotions and novelty'),
      h(
        'p',
        {},
        (r.emotions ?? []).length
          ? r.emotions.map((e) => `${e.emotion}:${e.strength}${e.reason ? ` (${e.reason})` : ''}`).join(' · ')
          : 'no emotions recorded',
      ),
      h(
        'p',
        {},
        `novelty ${num(r.novelty, 0)}; confidence ${num(r.confidence)}; context ${r.contextMode}; tags ${(r.tags ?? []).join(', ') || '-'}`,
      ),
      r.ideas
        ? h(
            'p',
            {},
            `ideas: new ${r.ideas.new.join('; ') || '-'} · refined ${r.ideas.refined.join('; ') || '-'} · discarded ${r.ideas.discarded.join('; ') || '-'}`,
          )
        : null,
      r.stagnation
        ? h('p', { class: 'warn' }, `stagnation: ${r.stagnationReason ?? ''} ${(r.stagnationActions ?? []).join(', ')}`)
        : null,
    ),
  );
}

/** The live tick list: rows inserted as the feed tells of them, newest first, each expandable. */
function tickList(agentId) {
  const list = h('ol', { class: 'ticks', id: 'ticks' });
  const rows = new Map();
  const base = `/api/agents/${encodeURIComponent(agentId)}`;
  async function openDetail(li, tick) {
    const body = li.querySelector('.tick-body');
    try {
      fill(body, tickDetail(await api(`${base}/ticks/${tick}`)));
    } catch (err) {
      fill(body, errorView(err));
    }
  }
  function render(t) {
    let li = rows.get(t.tick);
    const details = h('details', {}, tickSummary(t), h('div', { class: 'tick-body' }, 'loading…'));
    details.addEventListener('toggle', () => details.open && void openDetail(li, t.tick));
    if (li) {
      const wasOpen = li.querySelector('details').open;
      fill(li, details);
      if (wasOpen) details.open = true;
      return;
    }
    li = h('li', { class: 'tick', 'data-tick': t.tick }, details);
    rows.set(t.tick, li);
    const after = [...list.children].find((x) => Number(x.dataset.tick) < t.tick);
    list.insertBefore(li, after ?? null);
  }
  const pending = new Map();
  /** Fetch one tick's row (at most one request per tick at a time; a later event fetches again after). */
  function refresh(tick) {
    if (pending.has(tick)) return void pending.set(tick, true);
    pending.set(tick, false);
    api(`${base}/ticks?before=${tick + 1}&limit=1`)
      .then(({ ticks }) => ticks[0]?.tick === tick && render(ticks[0]))
      .catch(() => undefined)
      .finally(() => {
        const again = pending.get(tick);
        pending.delete(tick);
        if (again) refresh(tick);
      });
  }
  async function load() {
    const { ticks } = await api(`${base}/ticks?limit=50`);
    for (const t of ticks) render(t);
  }
  return { list, load, refresh };
}

function picturesView(series) {
  const t = series.ticks;
  const lf = series.lifeforce;
  return h(
    'div',
    { class: 'pictures' },
    lineChart({
      id: 'chart-novelty',
      title: 'Novelty over ticks',
      caption: '0–100, how new each reply was',
      series: [{ label: 'novelty', points: t.map((p) => ({ x: p.tick, y: p.novelty })) }],
      yMin: 0,
      yMax: 100,
      xFormat: (x) => `tick ${x}`,
    }),
    lineChart({
      id: 'chart-rating',
      title: 'Validator rating over ticks',
      caption: '−3…+3, trust-weighted',
      series: [{ label: 'rating', points: t.map((p) => ({ x: p.tick, y: p.rating })) }],
      yMin: -3,
      yMax: 3,
      xFormat: (x) => `tick ${x}`,
    }),
    lineChart({
      id: 'chart-trust',
      title: 'Validator trust over time',
      caption: 'each validator’s trust at the ticks it voted',
      series: Object.entries(series.trust).map(([name, pts]) => ({
        label: name,
        points: pts.map((p) => ({ x: p.tick, y: p.trust })),
      })),
      yMin: 0,
      xFormat: (x) => `tick ${x}`,
    }),
    lineChart({
      id: 'chart-decay',
      title: 'Learning confidence decay',
      caption: `projected: × 0.9 a day once not reinforced for 7 days; below ${series.decay.loadAbove} it leaves the context, below ${series.decay.deleteBelow} it is deleted`,
      series: series.decay.learnings.map((l) => ({
        label: l.label,
        points: l.points.map((p) => ({ x: p.day, y: p.confidence })),
      })),
      yMin: 0,
      yMax: 1,
      refLines: [
        { y: series.decay.loadAbove, label: 'leaves the context' },
        { y: series.decay.deleteBelow, label: 'deleted' },
      ],
      xFormat: (x) => (x === 0 ? 'today' : `in ${x} d`),
    }),
    lf
      ? lineChart({
          id: 'chart-lifeforce',
          title: lf.unlimited ? 'Lifeforce spent' : 'Lifeforce balance',
          caption: lf.unlimited
            ? 'unlimited budget: cumulative spend (LF) from the ledger'
            : 'LF not spent yet (available + held for running work), from the ledger; regeneration is not drawn',
          series: [{ label: lf.measure, points: lf.points.map((p) => ({ x: new Date(p.at).getTime(), y: p.value })) }],
          refLines: [
            ...(lf.capacity !== null ? [{ y: lf.capacity, label: 'capacity' }] : []),
            ...(lf.available !== null ? [{ y: lf.available, label: `available now ${num(lf.available, 1)}` }] : []),
          ],
          xFormat: (x) => new Date(x).toLocaleTimeString(),
        })
      : h('p', { class: 'muted' }, 'no lifeforce budget yet'),
  );
}

function list(title, items, item) {
  return h(
    'section',
    { class: 'memory-part' },
    h('h3', {}, `${title} (${items.length})`),
    items.length
      ? h(
          'ul',
          {},
          items.map((x) => h('li', {}, item(x))),
        )
      : h('p', { class: 'muted' }, 'none'),
  );
}

function memoryView(m) {
  return h(
    'div',
    { class: 'memory' },
    list('Diary', m.diary, (d) => [
      h('strong', {}, d.title),
      ` (${d.source}${d.tick !== null ? `, tick ${d.tick}` : ''}) `,
      h('div', { class: 'text' }, d.content),
    ]),
    list('Goals', m.goals, (g) => [
      h('strong', {}, g.title),
      ` — ${g.status}, priority ${g.priority}`,
      g.failureReason ? ` (${g.failureReason})` : '',
      g.description ? h('div', { class: 'text' }, g.description) : null,
    ]),
    list('Tasks', m.tasks, (t) => [
      `#${t.id} `,
      h('strong', {}, t.title),
      ` — ${t.status}${t.replStatus ? `, loop ${t.replStatus}` : ''}`,
      t.lastError ? ` (${t.lastError})` : '',
    ]),
    list('Learnings', m.learnings, (l) => [
      `#${l.id} `,
      h('strong', {}, l.predicate),
      ` ${JSON.stringify(l.args)} — confidence ${num(l.confidence)}, reinforced ${l.reinforcements}×`,
      h('div', { class: 'why' }, 'why: ', l.why),
    ]),
    list('Facts', m.facts, (f) => [
      h('span', { class: 'text' }, f.fact),
      ` — ${f.status}, confidence ${num(f.confidence)}${f.sourceTick !== null ? `, tick ${f.sourceTick}` : ''}`,
      f.resolution ? ` (${f.resolution})` : '',
    ]),
    list('Notes', m.notes, (n) => [
      h(
        'span',
        { class: 'muted' },
        `#${n.id} ${n.direction === 'in' ? `from ${n.source}` : `to ${n.recipient ?? '?'}`}${n.tickSeen !== null ? `, read at tick ${n.tickSeen}` : ''}: `,
      ),
      h('span', { class: 'text' }, n.text),
    ]),
  );
}

function tabs(panes) {
  const bar = h('div', { class: 'tabs', role: 'tablist' });
  const holder = h('div');
  const show = (name) => {
    for (const [n, p] of Object.entries(panes)) p.el.hidden = n !== name;
    for (const b of bar.children) b.classList.toggle('current', b.dataset.tab === name);
    panes[name].onShow?.();
  };
  for (const name of Object.keys(panes)) bar.append(button(name, () => show(name), { 'data-tab': name, role: 'tab' }));
  holder.append(...Object.values(panes).map((p) => p.el));
  return { el: h('div', {}, bar, holder), show };
}

/** One agent: status and controls, the note box, live ticks, pictures, memory, its agent file and its MCP servers. */
export function agentView(root, agentId) {
  const base = `/api/agents/${encodeURIComponent(agentId)}`;
  const status = h('div', { id: 'status-box' }, 'loading…');
  const goalsOpen = { value: false };
  let statusTimer;
  const loadStatus = async () => {
    try {
      const r = await api(base);
      fill(status, statusLine(r), goalsView(r.goals, goalsOpen));
    } catch (err) {
      fill(status, errorView(err));
    }
  };
  /** The status query at most every 3 s, however fast the ticks come. */
  const statusSoon = () => (statusTimer ??= setTimeout(() => ((statusTimer = undefined), void loadStatus()), 3000));
  const ticks = tickList(agentId);
  const pictures = h('div', { id: 'pictures' });
  const memory = h('div', { id: 'memory' });
  let picturesAt = 0;
  const loadPictures = async (force) => {
    if (!force && (pane.pictures.el.hidden || Date.now() - picturesAt < 5000)) return;
    picturesAt = Date.now();
    try {
      fill(pictures, picturesView(await api(`${base}/series`)));
    } catch (err) {
      fill(pictures, errorView(err));
    }
  };
  const loadMemory = async () => {
    try {
      fill(memory, memoryView(await api(`${base}/memory`)));
    } catch (err) {
      fill(memory, errorView(err));
    }
  };
  const pane = {
    ticks: { el: h('section', { id: 'pane-ticks' }, ticks.list) },
    pictures: {
      el: h(
        'section',
        { id: 'pane-pictures' },
        button('redraw', () => loadPictures(true)),
        pictures,
      ),
      onShow: () => loadPictures(true),
    },
    memory: { el: h('section', { id: 'pane-memory' }, button('reload', loadMemory), memory), onShow: loadMemory },
    'agent file': agentFilePane(agentId),
    mcp: mcpPane(agentId),
  };
  const t = tabs(pane);
  // After a pause or stop no tick tells us the loop's new state: look twice.
  const afterControl = () => [1000, 4000].forEach((ms) => setTimeout(loadStatus, ms));
  fill(
    root,
    h('h1', {}, `Agent ${agentId}`),
    h('p', {}, loopControls(agentId, afterControl)),
    status,
    noteBox(agentId),
    t.el,
  );
  t.show('ticks');
  void loadStatus();
  ticks.load().catch((err) => ticks.list.replaceWith(errorView(err)));
  const stop = listen(agentId, {
    beat(e) {
      if (e.loop !== 'main') return;
      ticks.refresh(e.tick);
      statusSoon();
    },
    reply: (e) => ticks.refresh(e.tick),
    verdict(e) {
      ticks.refresh(e.tick);
      void loadPictures(false);
    },
    learning: () => !pane.memory.el.hidden && void loadMemory(),
  });
  return () => {
    stop();
    clearTimeout(statusTimer);
  };
}
