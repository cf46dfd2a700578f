// The inbox: everything that waits for a human — escalations (a held danger-zone command among
// them) and fork verdicts at the human gate — each with its deadline counting down and the
// answers the CLI gives (`mindloop escalations approve|reject|nudge|veto`, `mindloop forks approve|reject`).
import { api, button, countdown, errorView, fill, h, listen, num, when, who } from './dom.js';

const deadlineEl = (iso) => h('span', { class: 'deadline', 'data-deadline': iso ?? '' }, countdown(iso));

function escalationCard(e, after) {
  const text = h('textarea', {
    class: 'answer-text',
    rows: 2,
    placeholder: 'comment (approve), reason (reject, veto) or the nudge',
  });
  const result = h('div', { class: 'result' });
  const send = (answer) => async () => {
    const t = text.value.trim();
    const body = {
      by: who(),
      ...(answer === 'approve' ? (t ? { comment: t } : {}) : answer === 'nudge' ? { text: t } : { reason: t }),
    };
    try {
      const s = await api(`/api/escalations/${encodeURIComponent(e.id)}/${answer}`, { method: 'POST', body });
      fill(
        result,
        h(
          'span',
          { class: 'ok' },
          `${answer} sent — phase ${s.phase}${s.human ? `, human ${s.human.verdict} by ${s.human.by}` : ''}${s.decision ? `; decided: ${s.decision.outcome}` : ''}`,
        ),
      );
      setTimeout(after, 1500);
    } catch (err) {
      fill(result, errorView(err));
    }
  };
  const danger = e.kind === 'danger_hold';
  return h(
    'article',
    { class: `item ${danger ? 'danger' : 'escalation'}`, 'data-escalation': e.id },
    h(
      'header',
      {},
      h('span', { class: 'kind' }, danger ? 'danger-zone hold' : 'escalation'),
      ' ',
      h('code', {}, e.id),
      ' · agent ',
      h('a', { href: `#/agent/${encodeURIComponent(e.agentId)}` }, e.agentId),
      ` · ${e.category} · ${e.status.replace('_', ' ')}`,
      e.tick !== null ? ` · tick ${e.tick}` : '',
      ' · ',
      deadlineEl(e.deadlineAt),
    ),
    h('p', { class: 'task' }, e.task),
    e.whatITried ? h('p', {}, h('em', {}, 'tried: '), e.whatITried) : null,
    danger
      ? h(
          'p',
          {},
          'danger flags: ',
          e.dangerFlags.map((f) => h('code', {}, f, ' ')),
        )
      : null,
    e.proposal?.action
      ? h(
          'details',
          {},
          h('summary', {}, 'the held action'),
          h('pre', { class: 'json' }, JSON.stringify(e.proposal.action, null, 2)),
        )
      : null,
    e.solution
      ? h('p', {}, h('em', {}, `oversight (${e.oversightAnswer ?? '?'}): `), e.solution)
      : h(
          'p',
          { class: 'muted' },
          e.status === 'awaiting_human'
            ? 'waiting for a human'
            : 'the oversight is answering; a human answer still wins',
        ),
    e.teachingMoment ? h('p', {}, h('em', {}, 'teaching: '), e.teachingMoment) : null,
    h('p', { class: 'muted' }, `opened ${when(e.createdAt)}, deadline ${when(e.deadlineAt)}`),
    text,
    h(
      'div',
      { class: 'answers' },
      ['approve', 'reject', 'nudge', 'veto'].map((a) => button(a, send(a), { 'data-answer': a, class: `btn-${a}` })),
    ),
    result,
  );
}

function forkCard(f, after) {
  const result = h('div', { class: 'result' });
  const send = (verdict) => async () => {
    try {
      const g = await api(`/api/forks/${encodeURIComponent(f.id)}/${verdict}`, { method: 'POST', body: { by: who() } });
      fill(result, h('span', { class: 'ok' }, `gate ${g.gate}${g.applied ? `: applied ${g.applied}` : ''}`));
      setTimeout(after, 1500);
    } catch (err) {
      fill(result, errorView(err));
    }
  };
  return h(
    'article',
    { class: 'item fork', 'data-fork': f.id },
    h(
      'header',
      {},
      h('span', { class: 'kind' }, 'fork gate'),
      ' ',
      h('code', {}, f.id),
      ' · agent ',
      h('a', { href: `#/agent/${encodeURIComponent(f.agentId)}` }, f.agentId),
      ` · verdict ${f.verdict} (confidence ${num(f.confidence)})`,
      ' · ',
      deadlineEl(f.deadlineAt),
    ),
    h('p', {}, f.summary),
    h('details', {}, h('summary', {}, 'the patch'), h('pre', { class: 'json' }, JSON.stringify(f.patch, null, 2))),
    f.caveats.length
      ? h(
          'ul',
          { class: 'caveats' },
          f.caveats.map((c) => h('li', {}, c)),
        )
      : null,
    h('p', {}, 'artifacts: '),
    h(
      'ul',
      { class: 'artifacts' },
      f.artifacts.map((a) =>
        h(
          'li',
          {},
          h('code', {}, a.name),
          ` ${a.bytes ?? '?'} B, sha256 ${(a.sha256 ?? '?').slice(0, 16)}…`,
          a.uri ? ` ${a.uri}` : '',
        ),
      ),
    ),
    h(
      'p',
      { class: 'muted' },
      'approve applies the patch to the parent agent; reject discards it; no answer before the deadline applies nothing',
    ),
    h(
      'div',
      { class: 'answers' },
      ['approve', 'reject'].map((v) => button(v, send(v), { 'data-answer': v, class: `btn-${v}` })),
    ),
    result,
  );
}

/**
 * Cards kept across reloads by what they show: a card whose item did not change stays the same
 * element, so an answer being typed or sent (and its result) survives a reload.
 */
function keyed(cards, items, keyOf, make) {
  const next = new Map();
  const out = items.map((item) => {
    const key = keyOf(item);
    const el = cards.get(key) ?? make(item);
    next.set(key, el);
    return el;
  });
  cards.clear();
  for (const [k, v] of next) cards.set(k, v);
  return out;
}

/** The inbox page; reloads when an escalation opens and every 30 s, and counts every second. */
export function inboxView(root, onChange) {
  const body = h('div', { id: 'inbox' }, 'loading…');
  const escalationCards = new Map();
  const forkCards = new Map();
  async function load() {
    try {
      const r = await api('/api/inbox');
      const reload = () => void load();
      const escalations = keyed(
        escalationCards,
        r.escalations,
        (e) => `${e.id}|${e.status}|${e.solution ?? ''}`,
        (e) => escalationCard(e, reload),
      );
      const forks = keyed(
        forkCards,
        r.forks,
        (f) => `${f.id}|${f.deadlineAt ?? ''}`,
        (f) => forkCard(f, reload),
      );
      fill(
        body,
        h('h2', {}, `Escalations and danger-zone holds (${escalations.length})`),
        escalations.length ? escalations : h('p', { class: 'muted' }, 'nothing waits'),
        h('h2', {}, `Fork gates (${forks.length})`),
        forks.length ? forks : h('p', { class: 'muted' }, 'no verdict waits at a gate'),
      );
      onChange();
    } catch (err) {
      fill(body, errorView(err));
    }
  }
  fill(
    root,
    h('h1', {}, 'Inbox'),
    h(
      'p',
      { class: 'muted' },
      'answers go to the workflows as the CLI sends them; the workflow may refuse one (already decided, no reason given) and says why',
    ),
    body,
  );
  void load();
  const tick = setInterval(() => {
    for (const el of root.querySelectorAll('[data-deadline]')) fill(el, countdown(el.dataset.deadline || null));
  }, 1000);
  const reload = setInterval(load, 30_000);
  const stop = listen(undefined, { escalation: () => setTimeout(load, 500) });
  return () => {
    clearInterval(tick);
    clearInterval(reload);
    stop();
  };
}
