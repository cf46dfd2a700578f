// An agent's MCP servers on its page: each server's health as the workers last saw it, its tools
// with their annotations, and its recent calls. A call of unknown outcome may or may not have
// happened and is never made again by itself, so it is marked for a person to look at. Every text
// here comes from the servers (tool descriptions, call results) and is shown as text only.
import { api, button, errorView, fill, h, when } from './dom.js';

const hints = [
  ['readOnlyHint', 'read-only'],
  ['destructiveHint', 'destructive'],
  ['idempotentHint', 'idempotent'],
  ['openWorldHint', 'open-world'],
];

/** The annotations a tool states, as chips (an absent hint is the protocol's default, shown as such). */
function annotationChips(a) {
  return hints.map(([key, label]) =>
    h(
      'span',
      {
        class: `chip annotation${key === 'destructiveHint' && a[key] ? ' warn' : ''}`,
        'data-hint': label,
        'data-value': a[key] === undefined ? 'unset' : String(a[key]),
      },
      a[key] === undefined ? `${label}: not said` : `${label}: ${a[key] ? 'yes' : 'no'}`,
    ),
  );
}

function healthText(s) {
  if (s.removed) return 'removed: no longer granted';
  if (!s.enabled) return 'disabled';
  if (s.health === null) return 'not started (no worker has used it since it was added)';
  const restarts = s.restarts ? `, restarted ${s.restarts}×` : '';
  const seen = s.healthAt ? `, last seen ${when(s.healthAt)}` : '';
  return s.health === 'up' ? `up${restarts}${seen}` : `down${restarts}${seen}: ${s.lastError ?? 'no error recorded'}`;
}

function toolsTable(s) {
  if (s.tools.length === 0) return h('p', { class: 'muted' }, 'no tools listed');
  return h(
    'table',
    { class: 'mcp-tools' },
    h('thead', {}, h('tr', {}, h('th', {}, 'tool'), h('th', {}, 'annotations'), h('th', {}, 'description'))),
    h(
      'tbody',
      {},
      s.tools.map((t) =>
        h(
          'tr',
          { 'data-tool': t.name },
          h('td', { class: 'name' }, h('code', {}, t.name), t.title ? h('div', { class: 'muted' }, t.title) : null),
          h('td', { class: 'annotations' }, annotationChips(t.annotations)),
          h('td', { class: 'description' }, t.description ?? ''),
        ),
      ),
    ),
  );
}

function callsTable(s) {
  if (s.calls.length === 0) return h('p', { class: 'muted' }, 'no calls yet');
  return h(
    'table',
    { class: 'mcp-calls' },
    h(
      'thead',
      {},
      h('tr', {}, h('th', {}, 'status'), h('th', {}, 'tool'), h('th', {}, 'when'), h('th', {}, 'text (clipped)')),
    ),
    h(
      'tbody',
      {},
      s.calls.map((c) =>
        h(
          'tr',
          { class: `mcp-call ${c.status}`, 'data-call': c.id, 'data-status': c.status },
          h(
            'td',
            { class: 'status' },
            c.status === 'unknown'
              ? h('strong', { class: 'warn', title: 'it may or may not have happened' }, 'OUTCOME UNKNOWN')
              : c.status,
          ),
          h('td', { class: 'tool' }, h('code', {}, c.tool)),
          h('td', { class: 'when' }, when(c.finishedAt ?? c.createdAt)),
          h('td', { class: 'text' }, c.text ?? ''),
        ),
      ),
    ),
  );
}

function serverView(s) {
  const down = !s.removed && s.enabled && s.health === 'down';
  return h(
    'article',
    { class: `mcp-server${down ? ' down' : ''}`, 'data-server': s.name },
    h(
      'h3',
      {},
      h('code', {}, s.name),
      ' ',
      h('span', { class: 'muted' }, [s.transport, s.source && `from ${s.source}`].filter(Boolean).join(' · ')),
    ),
    h('p', { class: `health${down ? ' warn' : ''}`, 'data-health': s.health ?? 'none' }, healthText(s)),
    s.unknownCalls > 0
      ? h(
          'div',
          { class: 'error mcp-unknown', role: 'alert' },
          `${s.unknownCalls} call(s) of unknown outcome in the last 24 h: they may or may not have happened and are never made again by themselves. See on the server's side whether each did, then tell the agent.`,
        )
      : null,
    s.removed ? null : [h('h4', {}, `tools (${s.tools.length})`), toolsTable(s)],
    h('h4', {}, 'recent calls'),
    callsTable(s),
  );
}

/** The "mcp" tab's pane: `el` to place, `onShow` (re)reads the servers. */
export function mcpPane(agentId) {
  const path = `/api/agents/${encodeURIComponent(agentId)}/mcp`;
  const box = h('div', { id: 'mcp-servers' }, 'loading…');
  const load = async () => {
    try {
      const r = await api(path);
      fill(
        box,
        r.servers.length === 0
          ? h('p', { class: 'muted', id: 'mcp-note' }, 'no MCP servers: grant one with mindloop tools mcp add')
          : r.servers.map(serverView),
      );
    } catch (err) {
      fill(box, errorView(err));
    }
  };
  const el = h('section', { id: 'pane-mcp' }, button('reload', load), box);
  return { el, onShow: load };
}
