// An agent's file on its page: the YAML `mindloop agents export` writes, shown read-only as text,
// with a download of it and the way to change it (edit the file, then apply it with the CLI).
import { ApiError, button, errorView, fill, h } from './dom.js';

/** The file's text; an error answer (JSON) throws an ApiError as `api` does. */
async function fileText(path) {
  const res = await fetch(path, { credentials: 'same-origin' });
  const text = await res.text();
  if (res.ok) return text;
  let body;
  try {
    body = JSON.parse(text);
  } catch {
    body = { error: text };
  }
  throw new ApiError(res.status, body);
}

/** The "agent file" tab's pane: `el` to place, `onShow` (re)reads the file. */
export function agentFilePane(agentId) {
  const path = `/api/agents/${encodeURIComponent(agentId)}/file`;
  const name = `${agentId}.yaml`;
  const box = h('div', { id: 'agent-file' }, 'loading…');
  const load = async () => {
    try {
      // The agent's own words stay text: the YAML is one text node, never parsed as HTML.
      fill(box, h('pre', { class: 'agent-file', id: 'agent-file-text' }, await fileText(path)));
    } catch (err) {
      fill(box, errorView(err));
    }
  };
  const el = h(
    'section',
    { id: 'pane-file' },
    h(
      'p',
      { class: 'agent-file-bar' },
      h('a', { class: 'button', id: 'agent-file-download', href: path, download: name }, `download ${name}`),
      ' ',
      button('reload', load),
    ),
    h(
      'p',
      { class: 'muted', id: 'agent-file-how' },
      'The agent as it is now, as ',
      h('code', {}, `mindloop agents export ${agentId}`),
      ' writes it. Read-only here: to change it, edit the file, then ',
      h('code', {}, `mindloop apply -f ${name}`),
      '.',
    ),
    box,
  );
  return { el, onShow: load };
}
