// The goal metrics of one agent's overview: the summary line and a table of its goals. Every
// text (a goal's title) becomes a text node through `h`, never HTML.
import { h } from './dom.js';

/** A duration as the goal metrics say it: 45s, 12m, 2h10m, 3d4h. */
function duration(ms) {
  if (ms === null || ms === undefined) return '-';
  const sec = Math.round(ms / 1000);
  if (sec < 60) return `${sec}s`;
  const m = Math.round(sec / 60);
  if (m < 60) return `${m}m`;
  if (m < 24 * 60) return `${Math.floor(m / 60)}h${String(m % 60).padStart(2, '0')}m`;
  const hr = Math.round(m / 60);
  return `${Math.floor(hr / 24)}d${hr % 24}h`;
}

/** Goals shown by the overview: the open ones first, then the latest closed, at most this many. */
const goalsShown = 12;

/**
 * The goal metrics under the status: the line `mindloop status` prints, and per goal its status,
 * tasks (open of all), interruptions and time to achieve. `open` keeps the table's state across reloads.
 */
export function goalsView(g, open) {
  if (!g || !g.total) return null;
  const isOpen = (x) => x.status === 'active' || x.status === 'paused';
  const rows = [...g.perGoal.filter(isOpen), ...g.perGoal.filter((x) => !isOpen(x)).reverse()].slice(0, goalsShown);
  const details = h(
    'details',
    { class: 'goals', id: 'goals', open: open.value },
    h('summary', {}, h('span', { class: 'muted' }, 'goals '), h('span', { 'data-key': 'goals' }, g.summary)),
    h(
      'table',
      { class: 'goals' },
      h(
        'thead',
        {},
        h(
          'tr',
          {},
          ['goal', 'status', 'open tasks', 'tasks', 'interruptions', 'time to achieve'].map((t) => h('th', {}, t)),
        ),
      ),
      h(
        'tbody',
        {},
        rows.map((x) =>
          h(
            'tr',
            { 'data-goal': x.id },
            h('td', {}, `#${x.id} ${x.title}`),
            h('td', {}, x.status),
            h('td', {}, String(x.openTasks)),
            h('td', {}, String(x.tasks)),
            h('td', {}, String(x.interruptions)),
            h('td', {}, duration(x.msToAchieve)),
          ),
        ),
      ),
    ),
    g.total > rows.length ? h('p', { class: 'muted' }, `${g.total - rows.length} more goals`) : null,
  );
  details.addEventListener('toggle', () => (open.value = details.open));
  return details;
}
