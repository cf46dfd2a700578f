/** `mindloop start|stop|pause|resume|note|status`: talk to one agent's loop workflow; `mindloop agents` (cli/descendants.ts): spawn and lineage. */
import { InvalidArgumentError, type Command } from 'commander';
import { WorkflowNotFoundError, WorkflowUpdateFailedError } from '@temporalio/client';
import { agentIdSchema, workflowIds } from '../core/ids.js';
import { agentLoopStatus, type AgentLoopStatus } from '../runtime/operator.js';
import { startAgentLoop } from '../runtime/workflow-starts.js';
import type { AddNoteResult, AgentStatus, agentLoopWorkflow } from '../workflows/agent-loop.js';
import { numberArg } from './args.js';
import { withClient } from './client.js';
import { formatSpeechResult, speechOutcome, startAudioNote } from './speech.js';
import { speechLanguageSchema } from '../core/speech/engine.js';
import { loadEnvOrExit } from '../env.js';
import { registerDescendantCommands } from './descendants.js';

function agentId(raw: string): string {
  const r = agentIdSchema.safeParse(raw);
  if (!r.success) throw new Error(`bad agent id "${raw}": ${r.error.issues[0]?.message}`);
  return r.data;
}

// The loop's status lives with the other operator reads (runtime/operator.ts); tests import it from here too.
export { agentLoopStatus, type AgentLoopStatus };

const int = numberArg;

/** Render the status query for a person. */
export function formatStatus(s: AgentStatus): string {
  const lines = [
    `agent ${s.agentId} — tick ${s.tick}, ${s.phase}${s.paused ? ' (paused)' : ''}, mode ${s.operatingMode}`,
    `  llm          ${s.llm ?? '(none yet)'}`,
    `  context      ${s.settings.contextMode}, last ${s.settings.recentK} responses; notes ${s.settings.notesMode}; delay ${s.settings.delayMs} ms${s.settings.idle.on ? `; idle until ${s.settings.idle.wakeOn.join('/')}` : ''}`,
    `  last reply   ${s.last ? `${s.last.summary} (${s.last.model})` : '(none yet)'}`,
    `  validation   ${s.lastVerdict ? `${s.lastVerdict.validationMode}${s.lastVerdict.rating === null ? '' : ` rating ${s.lastVerdict.rating}`}` : '-'}`,
    `  commands     ${s.counters.commandsApplied} applied, ${s.counters.commandsRejected} rejected, ${s.counters.commandsUnvalidated} unvalidated; parse errors ${s.counters.parseErrors}`,
    `  notes in     ${s.counters.notesReceived}; LLM failures ${s.counters.llmFailures}; outages ${s.counters.outages}`,
  ];
  if (s.reflexes) {
    const r = s.reflexes;
    lines.push(`  reflexes     novelty ${r.lastNovelty ?? '-'}; low streak ${r.lowStreak}; Reflex-lite ${r.reflexLiteFired}×, strategies ${r.strategiesFired}×; validator timeouts ${r.validatorTimeouts}`);
    const held = Object.entries(r.held ?? {});
    if (held.length) lines.push(`  unvalidated  ${held.map(([id, why]) => `${id}: ${why}`).join('; ')}  (all: mindloop unvalidated ${s.agentId})`);
  }
  const lf = s.lifeforce;
  if (lf) {
    const left = lf.available === null ? 'unlimited' : `${lf.available} LF available${lf.capacity !== null ? ` of ${lf.capacity}` : ''}`;
    lines.push(`  lifeforce    ${left}; last tick ${lf.lastCharge ?? '-'} LF; priority ${lf.priorityKey}; when exhausted: ${lf.onExhausted}  (mindloop lifeforce ${s.agentId})`);
    const x = lf.exhausted;
    if (x) lines.push(`  EXHAUSTED    since ${x.since}: ${x.needed} LF refused (${x.reason}); ${x.waitMs === null ? 'waiting for a grant' : `regeneration covers it in ${Math.ceil(x.waitMs / 60_000)} min`}${x.escalationId ? `; escalation ${x.escalationId} asks a human` : ''}`);
  }
  if (s.outage) lines.push(`  CORE OUTAGE  since ${s.outage.since}, ${s.outage.attempts} attempt(s): ${s.outage.lastError}`);
  const iso = s.isolation;
  if (iso?.since) lines.push(`  ISOLATED     since ${iso.since} (tick ${iso.sinceTick ?? '?'}): none of ${iso.known} known peer(s) reachable for ${iso.unreachableTicks} tick(s); applied commands tagged emergency_consensus`);
  else if (iso && iso.known > 0) lines.push(`  peers        ${iso.reachable.length ? `reachable: ${iso.reachable.join(', ')}` : 'none reachable'} (${iso.known} known)${iso.unreachableTicks ? `; unreachable for ${iso.unreachableTicks} tick(s)` : ''}`);
  if (s.degraded) lines.push(`  DEGRADED     ${s.degraded.step} waits for an unavailable dependency since ${s.degraded.since}, ${s.degraded.attempts} attempt(s): ${s.degraded.lastError}`);
  if (s.queuedNotes) lines.push(`  queued notes ${s.queuedNotes} (stored when the database returns)`);
  if (s.lastTickFailure) lines.push(`  last failed  tick ${s.lastTickFailure.tick} at ${s.lastTickFailure.step}: ${s.lastTickFailure.error} (${s.counters.tickFailures ?? 0} in all)`);
  const loops = Object.entries(s.taskLoops);
  if (loops.length) lines.push(`  task loops   ${loops.map(([t, id]) => `#${t} (${id})`).join(', ')}`);
  return lines.join('\n');
}

/** Render the execution state and, when the query answered, the status. */
export function formatExecution(r: AgentLoopStatus): string {
  const head =
    r.execution.status === 'RUNNING'
      ? []
      : [`workflow ${r.workflowId} is ${r.execution.status} (since ${r.execution.closeTime}): ${r.execution.reason}`, `  start it again with \`mindloop start ${r.workflowId.replace(/^agent\//, '')}\` (it goes on from its last tick)`];
  if (!r.status) return [...head, `  status query: ${r.queryError ?? 'no answer'}`].join('\n');
  return [...head, r.execution.status === 'RUNNING' ? formatStatus(r.status) : `last status:\n${formatStatus(r.status)}`].join('\n');
}

export function registerAgentCommands(program: Command): void {
  program
    .command('start')
    .description("start (or find) an agent's loop workflow, agent/<id>")
    .argument('<agent>', 'agent id')
    .option('--name <name>', 'display name')
    .option('--delay-ms <ms>', 'pause between ticks', int('--delay-ms', 0, 3_600_000))
    .option('--max-ticks <n>', 'complete after n ticks', int('--max-ticks', 1, 1_000_000))
    .option('--lifeforce <LF>', "a new agent's budget (default unlimited; later: mindloop lifeforce set)", int('--lifeforce', 0, 1_000_000_000))
    .option('--regen <LF>', 'LF regenerated per hour, up to the budget', int('--regen', 0, 1_000_000_000))
    .option('--on-exhausted <policy>', 'pause (wait for regeneration or a grant) or escalate (ask a human for a grant)', (v: string) => {
      if (v !== 'pause' && v !== 'escalate') throw new InvalidArgumentError('expected pause or escalate');
      return v;
    })
    .action(async (raw: string, opts: { name?: string; delayMs?: number; maxTicks?: number; lifeforce?: number; regen?: number; onExhausted?: 'pause' | 'escalate' }) => {
      const id = agentId(raw);
      const lifeforce = opts.lifeforce === undefined && opts.regen === undefined && opts.onExhausted === undefined ? undefined : { ...(opts.lifeforce !== undefined ? { capacity: opts.lifeforce } : {}), ...(opts.regen !== undefined ? { regenPerHour: opts.regen } : {}), ...(opts.onExhausted ? { onExhausted: opts.onExhausted } : {}) };
      await withClient(async (client) => {
        const handle = await startAgentLoop(client, { agentId: id, name: opts.name, delayMs: opts.delayMs, maxTicks: opts.maxTicks, ...(lifeforce ? { lifeforce } : {}) });
        process.stdout.write(`agent ${id} running as workflow ${handle.workflowId} (run ${handle.firstExecutionRunId})\n`);
      });
    });

  for (const [name, signal, text] of [
    ['stop', 'stop', 'finish the current tick, then stop the loop'],
    ['pause', 'pause', 'pause the loop after the current tick'],
    ['resume', 'resume', 'resume a paused loop'],
  ] as const) {
    program
      .command(name)
      .description(text)
      .argument('<agent>', 'agent id')
      .action(async (raw: string) => {
        const id = agentId(raw);
        await withClient(async (client) => {
          await client.workflow.getHandle(workflowIds.agent(id)).signal(signal);
          process.stdout.write(`${name}: sent to ${workflowIds.agent(id)}\n`);
        });
      });
  }

  program
    .command('note')
    .description('send the agent a note; it sees it in its next ticks. With --audio, a WAV file is transcribed into the note')
    .argument('<agent>', 'agent id')
    .argument('[text...]', 'the note (not with --audio)')
    .option('-p, --priority <n>', 'priority 0..10', int('--priority', 0, 10), 1)
    .option('-t, --tag <tag...>', 'tags')
    .option('--audio <file>', 'a WAV file to transcribe: copied under <MINDLOOP_DATA_DIR>/speech/<agent>/in/, heard by the speech engine, stored as the note with the audio on it')
    .option('--lang <code>', 'with --audio: the language spoken (en, de, …; default: detected)', (v: string) => {
      const r = speechLanguageSchema.safeParse(v);
      if (!r.success) throw new InvalidArgumentError(r.error.issues[0]?.message ?? 'bad language');
      return r.data;
    })
    .option('--wait', 'with --audio: wait for the transcription and print it')
    .action(async (raw: string, words: string[], opts: { priority: number; tag?: string[]; audio?: string; lang?: string; wait?: boolean }) => {
      const id = agentId(raw);
      if (opts.audio !== undefined) {
        if (words.length > 0) throw new Error('give either a text or --audio <file>, not both');
        const audio = opts.audio;
        const env = loadEnvOrExit();
        await withClient(async (client) => {
          const started = await startAudioNote(client, { agentId: id, file: audio, dataDir: env.MINDLOOP_DATA_DIR, language: opts.lang, priority: opts.priority, tags: opts.tag ?? [] });
          process.stdout.write(`transcribing ${audio} (${started.wav.durationS.toFixed(1)} s) for ${id} as workflow ${started.workflowId}\n`);
          if (opts.wait) process.stdout.write(`${formatSpeechResult(await speechOutcome(client, started.workflowId))}\n`);
        });
        return;
      }
      if (opts.lang !== undefined || opts.wait) throw new Error('--lang and --wait go with --audio <file>');
      if (words.length === 0) throw new Error('give the note as text, or --audio <file>');
      await withClient(async (client) => {
        let r: AddNoteResult;
        try {
          r = await client.workflow
            .getHandle<typeof agentLoopWorkflow>(workflowIds.agent(id))
            .executeUpdate<AddNoteResult, [unknown]>('addNote', { args: [{ text: words.join(' '), priority: opts.priority, tags: opts.tag ?? [] }] });
        } catch (err) {
          // The loop refused it (a bad note, or the database away with a full queue): say why.
          if (err instanceof WorkflowUpdateFailedError) throw new Error(err.cause?.message ?? err.message);
          if (err instanceof WorkflowNotFoundError) throw new Error(`no loop for agent ${id}: start it with \`mindloop start ${id}\` (nothing was stored)`);
          throw err;
        }
        process.stdout.write(r.queued ? `note queued for ${id}: ${r.message}\n` : r.noteId !== null ? `note #${r.noteId} delivered to ${id}\n` : `note for ${id} taken\n`);
      });
    });

  program
    .command('status')
    .description("the agent loop's status query")
    .argument('<agent>', 'agent id')
    .option('--json', 'print JSON')
    .action(async (raw: string, opts: { json?: boolean }) => {
      const id = agentId(raw);
      await withClient(async (client) => {
        const r = await agentLoopStatus(client, id);
        process.stdout.write(opts.json ? `${JSON.stringify(r, null, 2)}\n` : `${formatExecution(r)}\n`);
      });
    });

  registerDescendantCommands(program);
}
