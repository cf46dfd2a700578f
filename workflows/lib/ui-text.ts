/**
 * What the Temporal UI shows of Mindloop's workflows, worded in one place: the fixed summary
 * and details given at every start (by the CLI, the runner, a schedule or a parent workflow),
 * the labels of timers, the descriptions of queries, signals and updates, and the one line of
 * current details a running workflow keeps up to date. Pure string builders, no I/O and no
 * clock: workflow code and client code both import them.
 */
import { oneLine } from '../../core/sanitize.js';

// ---- formatting ---------------------------------------------------------------------------------

const units: ReadonlyArray<readonly [string, number]> = [
  ['d', 86_400_000],
  ['h', 3_600_000],
  ['min', 60_000],
  ['s', 1000],
];

/**
 * A duration as a person reads it: `250 ms`, `1 s`, `1.5 s`, `5 min`, `1 h 30 min`, `2 d`.
 * From a minute up: the largest unit and the next one when it is not zero.
 */
export function formatDuration(ms: number): string {
  if (!Number.isFinite(ms) || ms < 1000) return `${Math.max(0, Math.round(Number.isFinite(ms) ? ms : 0))} ms`;
  if (ms < 59_950) return `${+(ms / 1000).toFixed(1)} s`;
  const total = Math.round(ms / 1000) * 1000;
  const i = units.findIndex(([, size]) => total >= size);
  const [unit, size] = units[i]!;
  const n = Math.floor(total / size);
  const next = units[i + 1];
  const m = next ? Math.floor((total - n * size) / next[1]) : 0;
  return next && m > 0 ? `${n} ${unit} ${m} ${next[0]}` : `${n} ${unit}`;
}

const plural = (n: number, word: string) => `${n} ${word}${n === 1 ? '' : 's'}`;
const lines = (...rows: Array<string | false | null | undefined>) =>
  rows.filter((r): r is string => typeof r === 'string' && r !== '').join('\n');

/** Static summary and details of one workflow start. */
export interface StartText {
  staticSummary: string;
  staticDetails: string;
}

// ---- the agent loop -----------------------------------------------------------------------------

export function agentLoopText(o: { agentId: string; name?: string; delayMs?: number; maxTicks?: number }): StartText {
  const id = o.agentId;
  const named = o.name && o.name !== id ? ` (${oneLine(o.name, 60)})` : '';
  const started = [
    o.delayMs !== undefined && `delay ${formatDuration(o.delayMs)} between ticks`,
    o.maxTicks !== undefined && `completes after ${plural(o.maxTicks, 'tick')}`,
  ].filter(Boolean);
  return {
    staticSummary: `agent ${id}${named} — thinking loop`,
    staticDetails: lines(
      `**Thinking loop of agent \`${id}\`**: one tick after another — think (LLM), reflexes, commands, pacing — until stopped; it continues as new every few hundred ticks.`,
      `- status: query \`status\` · \`mindloop status ${id}\``,
      `- a note to the agent: update \`addNote\` · \`mindloop note ${id} "…"\``,
      `- signals \`pause\`, \`resume\`, \`stop\` · \`mindloop pause ${id}\`, \`mindloop resume ${id}\`, \`mindloop stop ${id}\``,
      `- loop settings (delay, idle, context): update \`setConfig\``,
      `- lifeforce: \`mindloop lifeforce ${id}\` (balance, burn rate, ledger) · \`mindloop lifeforce grant ${id} <LF>\`; an exhausted agent shows phase \`exhausted\``,
      `- its children: task loops \`agent/${id}/task/<id>\`, escalations \`escalation/<id>\`, tool generation \`tool/${id}/<capability>\``,
      started.length > 0 && `- started with ${started.join(', ')}`,
    ),
  };
}

/** The agent loop's current details: `tick 12 · thinking · llm scripted:x`. */
export function agentLoopCurrentDetails(s: {
  tick: number;
  phase: string;
  llm: string | null;
  mode: string;
  degradedStep?: string | null;
  queuedNotes?: number;
  lifeforce?: number | null;
}): string {
  return [
    `tick ${s.tick}`,
    s.phase === 'degraded' && s.degradedStep ? `degraded: ${s.degradedStep} waits for a dependency` : s.phase,
    `llm ${s.llm ?? '(none yet)'}`,
    typeof s.lifeforce === 'number' && `${Math.round(s.lifeforce * 10) / 10} LF left`,
    s.mode !== 'normal' && `mode ${s.mode}`,
    s.queuedNotes ? `${plural(s.queuedNotes, 'queued note')}` : null,
  ]
    .filter(Boolean)
    .join(' · ');
}

// ---- task loops, tool generation, escalations (children of the agent loop) -----------------------

export function nerveText(o: { agentId: string; nerve: string; steps: number }): StartText {
  return {
    staticSummary: `nerve ${o.nerve} of ${o.agentId}: ${plural(o.steps, 'step')}`,
    staticDetails: lines(
      `**Nerve \`${o.nerve}\`** of agent \`${o.agentId}\`: a behaviour as a state machine on its sensor stream, deciding deliberately (the LLM), by learned rules (hybrid) or by a compiled table (reflex).`,
      `- parent: \`agent/${o.agentId}\` · budget \`nerve:${o.agentId}/${o.nerve}\`, carved from the agent's`,
      `- status: query \`status\` · signal \`resume\` after a grant when its lifeforce ran out`,
    ),
  };
}

/** A speech job: a transcription into a note, or a text the agent says. */
export function speechText(o: {
  agentId: string;
  kind: 'transcribe' | 'speak';
  audioPath?: string;
  text?: string;
  requestedBy?: { tick: number; cmdId: string };
}): StartText {
  const what =
    o.kind === 'transcribe'
      ? `transcribe ${oneLine((o.audioPath ?? '').split('/').pop() ?? '', 60)}`
      : `speak "${oneLine(o.text ?? '', 60)}"`;
  return {
    staticSummary: `speech of ${o.agentId}: ${what}`,
    staticDetails: lines(
      o.kind === 'transcribe'
        ? `**Speech job** of agent \`${o.agentId}\`: the speech engine transcribes \`${o.audioPath ?? ''}\`; the text becomes the agent's note, with the audio recorded on it.`
        : `**Speech job** of agent \`${o.agentId}\`: the speech engine says a text of the agent; the WAV is written under the data dir and recorded as an outgoing note.`,
      `- routed to \`speech-gpu\` when a GPU speech worker polls it, else \`speech-cpu\`; waits (never fails) while no speech worker answers`,
      `- lifeforce: the seconds of audio on \`agent:${o.agentId}\`, held before and settled after`,
      `- status: query \`status\``,
      o.requestedBy && `- asked by the agent's \`speak\` command ${o.requestedBy.cmdId} at tick ${o.requestedBy.tick}`,
    ),
  };
}

export function taskLoopText(o: { agentId: string; taskId: number; title?: string; maxTicks?: number }): StartText {
  const title = o.title ? oneLine(o.title, 90) : '(untitled)';
  return {
    staticSummary: `task loop ${o.taskId} of ${o.agentId}: ${title}`,
    staticDetails: lines(
      `**Task loop for task #${o.taskId}** of agent \`${o.agentId}\`: the same tick, read-only; it writes notes to the agent's loop and its own task row.`,
      `- parent: \`agent/${o.agentId}\`${o.maxTicks ? ` · at most ${plural(o.maxTicks, 'tick')}` : ''}`,
      `- status: query \`status\` · signal \`stopTask\` ends it after its tick`,
    ),
  };
}

export function toolGenerationText(o: {
  agentId: string;
  capability: string;
  description?: string;
  requestedBy?: { workflowId: string; tick: number; cmdId: string };
}): StartText {
  return {
    staticSummary: `tool generation for ${o.agentId}: ${oneLine(o.capability, 80)}`,
    staticDetails: lines(
      `**A tool for capability \`${o.capability}\`** of agent \`${o.agentId}\`: the LLM writes it, a static check and its tests in the sandbox decide, then it is registered.`,
      o.description && `- asked for: ${oneLine(o.description, 300)}`,
      o.requestedBy &&
        `- requested by \`${o.requestedBy.workflowId}\` at tick ${o.requestedBy.tick} (command ${o.requestedBy.cmdId}); the result comes back as a note`,
    ),
  };
}

function escalationText(o: {
  escalationId: string;
  agentId: string;
  category?: string;
  task?: string;
  proposal?: { kind: string; name: string };
  humanRequired?: boolean;
  deadlineMs?: number;
}): StartText {
  const id = o.escalationId;
  const holds = o.proposal ? ` — holds ${o.proposal.kind} ${oneLine(o.proposal.name, 60)}` : '';
  return {
    staticSummary: `escalation ${id} of ${o.agentId}: ${o.category ?? 'general'}${holds}`,
    staticDetails: lines(
      `**Escalation \`${id}\`** of agent \`${o.agentId}\`: the oversight answers, a human may approve, reject, nudge or veto; the answer reaches the agent as a note.`,
      o.task && `- question: ${oneLine(o.task, 300)}`,
      o.humanRequired &&
        `- a human must answer${o.deadlineMs !== undefined ? ` within ${formatDuration(o.deadlineMs)}` : ''}`,
      `- status: query \`status\` · \`mindloop escalations show ${id}\``,
      `- the human: updates \`approve\`, \`reject\`, \`nudge\`, \`veto\` · \`mindloop escalations approve ${id}\` (or reject, nudge, veto)`,
    ),
  };
}

/** The same text from an escalation's JSON input, as a held command or `escalate` hands it over. */
export function escalationInputText(escalationId: string, input: Record<string, unknown>): StartText {
  const str = (v: unknown) => (typeof v === 'string' ? v : undefined);
  const p = input.proposal as { kind?: unknown; name?: unknown } | undefined;
  return escalationText({
    escalationId,
    agentId: str(input.agentId) ?? '?',
    category: str(input.category),
    task: str(input.task),
    proposal:
      p && typeof p.kind === 'string' && typeof p.name === 'string' ? { kind: p.kind, name: p.name } : undefined,
    humanRequired: input.humanRequired === true || (Array.isArray(input.dangerFlags) && input.dangerFlags.length > 0),
    deadlineMs: typeof input.deadlineMs === 'number' ? input.deadlineMs : undefined,
  });
}

/** What an escalation waits for, as its current details. */
export function escalationCurrentDetails(s: { phase: string; until?: string; designRound?: number }): string {
  if (s.phase === 'awaiting_human')
    return `awaiting a human answer until ${s.until ?? 'the deadline'} · \`mindloop escalations approve|reject|nudge|veto\``;
  if (s.phase === 'waiting')
    return `deadline passed: waiting through the grace period until ${s.until ?? 'its end'}, then denied`;
  if (s.phase === 'designing') return `design round ${s.designRound ?? 1}: tests run in the sandbox`;
  return s.phase;
}

// ---- successor forks ----------------------------------------------------------------------------

type PatchLike =
  | { kind: 'strategy'; strategy: string }
  | { kind: 'config'; values: Record<string, unknown> }
  | { kind: 'prompt'; promptKind?: string }
  | { kind: 'tool'; tool: string };

/** What a patch changes, in a few words: `abstracts strategy → keyword_cluster`, `config delayMs, recentK`. */
function patchText(patch: PatchLike, from?: string): string {
  switch (patch.kind) {
    case 'strategy':
      return `abstracts strategy ${from ? `${from} ` : ''}→ ${patch.strategy}`;
    case 'config':
      return `config ${oneLine(Object.keys(patch.values).join(', '), 80)}`;
    case 'prompt':
      return `${patch.promptKind ?? 'full'} system prompt`;
    case 'tool':
      return `tool ${oneLine(patch.tool, 60)}`;
  }
}

export function forkText(o: {
  forkId: string;
  agentId: string;
  patch: PatchLike;
  evaluation: { kind: string };
  from?: string;
  wallMs?: number;
  auditsForkId?: string;
}): StartText {
  const what = patchText(o.patch, o.from);
  return {
    staticSummary: o.auditsForkId
      ? `verifier of fork ${o.auditsForkId} (agent ${o.agentId}): ${what}`
      : `fork of ${o.agentId}: ${what}`,
    staticDetails: lines(
      `**Successor fork \`${o.forkId}\`** of agent \`${o.agentId}\`: an isolated copy gets the patch (${what}), is evaluated by ${o.evaluation.kind.replace(/_/g, ' ')}, and gets a verdict; the copy is destroyed.`,
      o.wallMs !== undefined && `- wall budget ${formatDuration(o.wallMs)}`,
      `- state: query \`forkState\` · \`mindloop forks show ${o.forkId}\``,
      !o.auditsForkId &&
        `- an APPROVE waits at the human gate: updates \`approveFork\`, \`rejectFork\` · \`mindloop forks approve ${o.forkId}\` / \`mindloop forks reject ${o.forkId}\``,
    ),
  };
}

export function forkCurrentDetails(s: { phase: string; verdict?: string; gateUntil?: string }): string {
  if (s.phase === 'awaiting_approval')
    return `verdict ${s.verdict ?? '?'}: awaiting the human gate${s.gateUntil ? ` until ${s.gateUntil}` : ''} · \`mindloop forks approve|reject\``;
  return s.verdict ? `${s.phase} · verdict ${s.verdict}` : s.phase;
}

// ---- descendants -------------------------------------------------------------------------------

/** A spawn: a descendant of an agent is born (`agent/<parent>/spawn/<name>`). */
export function spawnText(o: {
  parentId: string;
  type: string;
  name: string;
  goals?: readonly string[];
  budget?: number;
  requestedBy?: { tick: number; cmdId: string };
}): StartText {
  return {
    staticSummary: `spawn of ${o.parentId}: ${o.type} ${o.name}`,
    staticDetails: lines(
      `**Spawn** of agent \`${o.parentId}\`: a ${o.type} descendant \`${o.name}\` gets ${o.type === 'clone' ? 'a copy of every row its parent owns' : o.type === 'trained' ? "its parent's diary, concept graph and known peers" : 'nothing but the defaults'}, its parent's ethics policies, a peer link with its parent and its own loop \`agent/${o.name}\`.`,
      `- budget: ${o.budget === undefined ? 'from the parent’s (unlimited for an unlimited parent, else a quarter of what it has)' : `${o.budget} LF carved from the parent’s`}`,
      o.goals?.length ? `- goals: ${o.goals.map((g) => oneLine(g, 60)).join(' · ')}` : false,
      o.requestedBy ? `- asked by tick ${o.requestedBy.tick}, command ${o.requestedBy.cmdId}` : '- started by a person',
      `- state: query \`spawnState\` · lineage: \`mindloop agents tree ${o.parentId}\``,
    ),
  };
}

// ---- campaigns ----------------------------------------------------------------------------------

function campaignText(o: {
  campaignId: string;
  agentId: string;
  title: string;
  phases: ReadonlyArray<{ name: string; tasks: readonly unknown[] }>;
}): StartText {
  return {
    staticSummary: `campaign ${o.campaignId} of agent ${o.agentId}: ${plural(o.phases.length, 'phase')} — ${oneLine(o.title, 80)}`,
    staticDetails: lines(
      `**Campaign \`${o.campaignId}\`** of agent \`${o.agentId}\`: ${oneLine(o.title, 200)}. Phases run in order, each closed by a checkpoint; cancelled, it undoes its started work in reverse order.`,
      ...o.phases.map((p, i) => `${i + 1}. ${oneLine(p.name, 80)} (${plural(p.tasks.length, 'task')})`),
      `- progress: query \`progress\` · signals \`pause\`, \`resume\`, \`cancel\``,
    ),
  };
}

/**
 * A campaign task that runs as a child workflow: a sub-campaign reads as a campaign, a tool
 * generation as one; both say which task of which campaign they are.
 */
export function campaignTaskText(o: {
  campaignId: string;
  agentId: string;
  workflowId: string;
  phase: { index: number; total: number; name: string };
  task: { index: number; total: number; name: string };
  type: string;
  args: Record<string, unknown>;
}): StartText {
  const a = o.args;
  const where = `task ${o.task.index}/${o.task.total} (${oneLine(o.task.name, 40)}) of phase ${o.phase.index}/${o.phase.total} (${oneLine(o.phase.name, 40)}) of campaign \`${o.campaignId}\``;
  if (o.type === 'campaignWorkflow' && typeof a.title === 'string' && Array.isArray(a.phases)) {
    const phases = (a.phases as Array<{ name?: unknown; tasks?: unknown } | null>).map((p) => ({
      name: String(p?.name ?? '?'),
      tasks: Array.isArray(p?.tasks) ? p.tasks : [],
    }));
    const campaignId = typeof a.campaignId === 'string' ? a.campaignId : o.workflowId.replace(/^campaign\//, '');
    const agentId = typeof a.agentId === 'string' ? a.agentId : o.agentId;
    const own = campaignText({ campaignId, agentId, title: a.title, phases });
    return { staticSummary: own.staticSummary, staticDetails: lines(own.staticDetails, `- runs as ${where}`) };
  }
  if (o.type === 'toolGenerationWorkflow' && typeof a.capability === 'string') {
    const own = toolGenerationText({
      agentId: typeof a.agentId === 'string' ? a.agentId : o.agentId,
      capability: a.capability,
      description: typeof a.description === 'string' ? a.description : undefined,
    });
    return { staticSummary: own.staticSummary, staticDetails: lines(own.staticDetails, `- runs as ${where}`) };
  }
  return {
    staticSummary: `campaign ${o.campaignId} task ${oneLine(o.phase.name, 40)}/${oneLine(o.task.name, 40)}: ${o.type}`,
    staticDetails: lines(
      `**\`${o.type}\`** for agent \`${o.agentId}\`, run as ${where}.`,
      `- its result feeds the phase's checkpoint; the campaign's query \`progress\` shows where it is`,
    ),
  };
}

export function campaignCurrentDetails(p: {
  status: string;
  phase: { index: number; total: number; name: string | null };
  task: { index: number; total: number; name: string | null };
  degradedStep?: string | null;
  pauseReason?: string | null;
}): string {
  const at =
    p.phase.index === 0
      ? 'starting'
      : `phase ${p.phase.index}/${p.phase.total} ${p.phase.name ?? ''}`.trim() +
        (p.task.index ? ` · task ${p.task.index}/${p.task.total} ${p.task.name ?? ''}`.trimEnd() : '');
  return [
    p.status,
    at,
    p.degradedStep ? `degraded: ${p.degradedStep} waits for a dependency` : null,
    p.status === 'paused' && p.pauseReason ? oneLine(p.pauseReason, 300) : null,
  ]
    .filter(Boolean)
    .join(' · ');
}

/** What a refused reservation or carve lacked: the budget, what was needed, what it has. */
export function lifeforceShortfallText(s: {
  budgetId: string;
  reason: string;
  needed: number;
  available: number | null;
}): string {
  return `budget ${s.budgetId} cannot cover ${s.needed} LF (${s.reason}; available ${s.available ?? 'unlimited'} LF)`;
}

/** Why a campaign paused itself for lifeforce, and what a human does about it. */
export function campaignLifeforcePause(o: {
  agentId: string;
  campaignId: string;
  step: string;
  shortfall: { budgetId: string; reason: string; needed: number; available: number | null };
}): string {
  const b = o.shortfall.budgetId;
  const grant = b.startsWith('agent:')
    ? `mindloop lifeforce grant ${o.agentId} <LF>`
    : `mindloop lifeforce grant ${o.agentId} <LF> --budget ${b}`;
  return `lifeforce exhausted (${o.step}): ${lifeforceShortfallText(o.shortfall)}; grant more (\`${grant}\`), then resume the campaign (signal \`resume\` to campaign/${o.campaignId})`;
}

// ---- maintenance schedules ----------------------------------------------------------------------

export function maintenanceScheduleText(o: { id: string; every: string; note: string }): StartText {
  const job = o.id.replace(/^maintenance\//, '').replace(/-/g, ' ');
  return {
    staticSummary: `maintenance: ${job}, every ${o.every}`,
    staticDetails: lines(
      `**Maintenance job \`${o.id}\`**: ${o.note}.`,
      `- runs at most once per period; a second run for the same period changes nothing and says so`,
      `- \`mindloop schedules list\` · \`mindloop schedules trigger ${o.id}\``,
    ),
  };
}

// ---- timers -------------------------------------------------------------------------------------

/** Timer labels, as the UI shows them on each TimerStarted event. */
export const timerText = {
  pacing: (ms: number) => `pacing ${formatDuration(ms)}`,
  exhausted: (ms: number | null, budgetId: string) =>
    ms === null
      ? `lifeforce exhausted (${budgetId}): waiting for a grant`
      : `lifeforce exhausted (${budgetId}): waiting ${formatDuration(ms)} for regeneration or a grant`,
  cyclePause: (ms: number, left: number) =>
    `cycle pause ${formatDuration(ms)} (${plural(left, 'tick')} left to sit out)`,
  idle: (ms: number, wakeOn: readonly string[]) => {
    const on = wakeOn.filter((w) => w !== 'timeout').map((w) => (w === 'note' ? 'a note' : 'a process'));
    return on.length ? `idle until ${on.join(' or ')} (timeout ${formatDuration(ms)})` : `idle ${formatDuration(ms)}`;
  },
  coreOutage: (ms: number, attempt: number) => `core outage backoff ${formatDuration(ms)} (probe ${attempt})`,
  degraded: (step: string, ms: number) => `degraded: retry ${oneLine(step, 60)} in ${formatDuration(ms)}`,
  taskPacing: (ms: number) => `task pacing ${formatDuration(ms)}`,
  taskOutage: (ms: number, attempt: number) => `outage backoff ${formatDuration(ms)} (attempt ${attempt})`,
  /** `ms`: the fork's whole wall budget (the timer itself runs for what is left of it). */
  forkWallBudget: (ms: number) => `fork wall budget ${formatDuration(ms)}`,
  forkGate: (ms: number) => `human gate: the APPROVE lapses in ${formatDuration(ms)}`,
  /** `ms`: the escalation's deadline (from its start) or grace period, as configured. */
  speechWait: (ms: number, attempt: number) =>
    `speech: no worker answered, asking again in ${formatDuration(ms)} (attempt ${attempt})`,
  humanDeadline: (phase: 'before_deadline' | 'grace' | 'expired', ms: number) =>
    phase === 'before_deadline'
      ? `human deadline (${formatDuration(ms)} from the start)`
      : `grace period ${formatDuration(ms)}, then denied`,
} as const;

// ---- query, signal and update descriptions ------------------------------------------------------

/** Descriptions of each workflow's handlers (the UI lists them through `__temporal_workflow_metadata`). */
export const handlerText = {
  agent: {
    status:
      'Tick, phase, mode, LLM in use, last reply, counters, outage or degraded state (`mindloop status <agent>`).',
    addNote:
      'A note to the agent, read in its next ticks; returns the note id, or says it is queued while the database is away (`mindloop note <agent> "…"`). With `audio: {path, language?}` instead of text it starts a transcription, whose text arrives as the note (`mindloop note <agent> --audio file.wav`).',
    wake: 'Wake an idle loop: something it waits for happened (a note from a task loop, a process finished, a lifeforce grant).',
    pause: 'Pause the loop after the current tick (`mindloop pause <agent>`).',
    resume: 'Resume a paused loop (`mindloop resume <agent>`).',
    stop: 'Finish the current tick, then complete the workflow (`mindloop stop <agent>`).',
    setConfig:
      'Change loop settings (delayMs, idle, contextMode, recentK, notes…), validated; returns the settings in force.',
    applyAgentFile:
      "Apply an agent file (its document): checked, compared with the last file and the agent's own changes (kept as drift), written with who and when, its loop settings put in force; dryRun answers the diff only.",
  },
  task: {
    status: 'Tick, repl status, last summary, tick cap, stop reason, outage wait.',
    stopTask: 'Finish the current tick, then stop the task loop.',
  },
  campaign: {
    progress: 'Phase i/n, task j/m, status, checkpoint verdicts, failures, compensation so far.',
    pause: 'Pause before the next task (the running one finishes).',
    resume: 'Resume a paused campaign (also one paused because its lifeforce budget ran out, after a grant).',
    cancel: 'Stop, undo started work in reverse order, and complete as cancelled.',
  },
  escalation: {
    status:
      'Phase, oversight and human answers so far, the decision once made, the deadline (`mindloop escalations show <id>`).',
    approve: 'A human approves (beats the oversight answer) (`mindloop escalations approve <id>`).',
    reject: 'A human rejects, with a reason (`mindloop escalations reject <id>`).',
    nudge: 'A human gives guidance instead of an approval (`mindloop escalations nudge <id>`).',
    veto: 'A human veto: beats everything, an oversight approval included (`mindloop escalations veto <id>`).',
  },
  nerve: {
    status:
      'Phase, step, state, the mode earned, decisions per mode and per decider, LF spent, promotions and demotions.',
    resume: 'Resume a nerve paused because its lifeforce budget ran out (after a grant or regeneration).',
  },
  speech: {
    status:
      'Phase (holding, queued, waiting for a speech worker, recording, done, failed), the route (GPU or CPU queue), the lifeforce held and charged, the result or the error.',
  },
  spawn: {
    spawnState:
      'Phase (admitting, copying, funding, starting, rolling back, done), the outcome once known and any dependency it waits for (`mindloop agents tree <parent>`).',
  },
  fork: {
    forkState: 'Phase, spawn time, copied rows, verdict and gate of the fork (`mindloop forks show <id>`).',
    approveFork: "Human gate: apply the APPROVE verdict's patch to the parent agent (`mindloop forks approve <id>`).",
    rejectFork: 'Human gate: discard the patch (`mindloop forks reject <id>`).',
  },
} as const;
