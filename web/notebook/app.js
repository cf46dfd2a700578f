// The notebook's shell: the routes (#/ agents, #/agent/<id>, #/inbox, #/models), the live stream, the inbox
// count in the header, and who answers as the human (kept in this browser).
import { api, fill, listen } from './dom.js';
import { agentsView, agentView } from './views.js';
import { inboxView } from './inbox.js';
import { modelsView } from './models.js';

async function refreshInboxCount() {
  try {
    const r = await api('/api/inbox');
    const n = r.escalations.length + r.forks.length;
    fill(document.getElementById('inbox-count'), n ? String(n) : '');
  } catch {
    // The count is a convenience; the inbox page says what went wrong.
  }
}

let leave = () => undefined;

function route() {
  leave();
  const main = document.getElementById('main');
  fill(main);
  const hash = decodeURIComponent(location.hash.replace(/^#/, '')) || '/';
  for (const a of document.querySelectorAll('header nav a'))
    a.classList.toggle('current', a.getAttribute('href') === (hash.startsWith('/agent/') ? '#/' : `#${hash}`));
  const agent = /^\/agent\/(.+)$/.exec(hash);
  if (agent) leave = agentView(main, agent[1]);
  else if (hash === '/inbox') leave = inboxView(main, refreshInboxCount);
  else if (hash === '/models') leave = modelsView(main);
  else leave = agentsView(main);
}

function start() {
  const whoInput = document.getElementById('who');
  whoInput.value = localStorage.getItem('mindloop.who') ?? 'human';
  whoInput.addEventListener('change', () => localStorage.setItem('mindloop.who', who()));
  window.addEventListener('hashchange', route);
  route();
  void refreshInboxCount();
  // The header's count follows escalations as they open; fork gates and decisions on the next one.
  listen(undefined, {
    escalation: () => void refreshInboxCount(),
    ready: (r) =>
      fill(
        document.getElementById('feed-source'),
        r.feedSource === 'bus' ? 'live from the bus' : 'live from this process',
      ),
  });
  setInterval(refreshInboxCount, 60_000);
}

if (document.readyState === 'loading') document.addEventListener('DOMContentLoaded', start);
else start();
