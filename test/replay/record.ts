/**
 * Records histories of real runs as replay fixtures (test/replay/histories/*.json):
 *   npx tsx test/replay/record.ts [agent] [campaign] [escalation] [fork] [decay] [maintenance] [embeddings] [nerve] [peers] [isolation] [spawn] [speech] [toolgen]
 * (the scenarios to record; default all). An embedded stack on a temp dir, the real activities
 * and the scripted model:
 * - agent: an agent loop that hears a note, applies commands, starts a task loop and
 *   continues-as-new; a provisioning.
 * - campaign: two phases of built-in tasks (note, diary.add); one cancelled by its `cancel`
 *   signal while a `wait` task runs in its second phase (compensation in the history).
 * - escalation: one decided by the (scripted) oversight; one where a human is required and
 *   answers through the `approve` update.
 * - fork: the demo strategy patch evaluated by `abstracts_replay`, then the `rejectFork` gate.
 * - decay: the maintenance learningDecayWorkflow.
 * - maintenance: the other maintenance jobs: the abstracts digest of the running agents, memory
 *   pruning beyond an agent's lru_limit, the process-log cleanup.
 * - embeddings: the hourly embeddings backfill of the running agents.
 * - nerve: a nerve in forced reflex on its table's fallbacks (no LLM): on the reflex arc since
 *   `nerve-reflex-arc-v1`, one nerveDecide per reading before it (both fixtures are kept).
 * - peers: two agents idle until a note comes: peer-a makes peer-b a peer and writes to it
 *   (the wake signal), peer-b answers and rates peer-a, peer-a rates peer-b and asks its task
 *   model a question (`llm_task.ask`).
 * - isolation: an agent whose only peer is stopped becomes isolated (`isolation-v1`) and
 *   returns to normal when the peer's row says it runs again.
 * - spawn: an agent loop whose `spawn` command starts the spawn of a newborn (`spawn-v1`), which
 *   is born and runs its own loop; a trained child spawned directly with a budget; a spawn
 *   refused at its admission (the parent's own name).
 * - speech: a WAV heard into an agent's note and a text said into a WAV, on a TypeScript stand-in
 *   for the Python engine polling `speech-cpu` (the workflow's side is what the history holds).
 * - toolgen: a tool written by the scripted model, checked, its tests run by `sandboxRun` on a
 *   `sandbox` worker (a local process for Docker), registered, and its requester told.
 * Re-record after an intended workflow change (and keep the old files while old runs live):
 * record only the scenarios whose workflows changed.
 */
import { mkdirSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { Client, Connection } from '@temporalio/client';
import { spawnSync } from 'node:child_process';
import { NativeConnection, Worker } from '@temporalio/worker';
import { createActivities } from '../../activities/index.js';
import { createToolActivities } from '../../activities/tools.js';
import { ensureDemoAgent } from '../../cli/forks.js';
import { subAgentBriefs, type EscalationInput, type OversightAnswer } from '../../core/escalation.js';
import type { CampaignInput } from '../../core/campaign.js';
import type { SpawnResult } from '../../core/society/spawn.js';
import { renderCommandBlock } from '../../core/reply-parser.js';
import {
  agentConfig,
  agents,
  concepts,
  diaryEntries,
  learnings,
  llmRecentResponses,
  llmRegistry,
  processLog,
} from '../../db/schema/index.js';
import { ensureBudget } from '../../db/queries/lifeforce.js';
import { linkPeers } from '../../db/queries/peers.js';
import { eq } from 'drizzle-orm';
import { createSandboxActivities } from '../../activities/sandbox.js';
import { queuePollers } from '../../activities/speech.js';
import { budgetIds } from '../../core/lifeforce.js';
import type { ToolGenerationResult } from '../../core/tool-generation.js';
import { createDocker } from '../../sandbox/docker.js';
import { startStack } from '../../runtime/stack.js';
import { bundleWorkflows } from '../../workers/queues.js';
import type { AgentStatus, agentLoopWorkflow } from '../../workflows/agent-loop/index.js';
import type { CampaignProgress } from '../../workflows/campaign.js';
import type { EscalationStatus } from '../../workflows/escalation.js';
import type { ForkState } from '../../workflows/successor-fork.js';
import type { SpeechResult } from '../../workflows/speech.js';
import { wordFreqTool } from '../fixtures/tools/word-frequencies.js';
import { freePort, repoToolsDir, tempDir, testEnv, toolPath } from '../helpers/env.js';
import { LocalProcessSandbox } from '../helpers/local-sandbox.js';
import { neutralReflexReplies } from '../helpers/scripted.js';
import { readUntil, sleep } from '../helpers/wait.js';
import { fakeEngine, writeWav } from '../speech-organ/helpers.js';
import { failoverWorkerOptions } from '../../workers/failover.js';

const scenarios = [
  'agent',
  'campaign',
  'escalation',
  'fork',
  'decay',
  'maintenance',
  'embeddings',
  'nerve',
  'peers',
  'isolation',
  'spawn',
  'speech',
  'toolgen',
] as const;
type Scenario = (typeof scenarios)[number];
const asked = process.argv.slice(2);
for (const a of asked)
  if (!(scenarios as readonly string[]).includes(a))
    throw new Error(`unknown scenario '${a}' (known: ${scenarios.join(', ')})`);
const wanted = new Set<Scenario>(asked.length ? (asked as Scenario[]) : scenarios);

const out = join(import.meta.dirname, 'histories');
/** The peers scenario's agents: their thinks by call order (a message, an answer and ratings, a question). */
const peerThinks = new Map<string, number>();
function peerReply(
  messages: Array<{ role: string; content: string }>,
  purpose: string | undefined,
): string | undefined {
  if (purpose === 'llm_task') return 'An answer from the helper model.';
  const who = /\(agent id (peer-[ab])\)/.exec(messages.find((m) => m.role === 'system')?.content ?? '')?.[1];
  if (!who) return undefined;
  if (purpose !== undefined && purpose !== 'think') return neutralReflexReplies[purpose] ?? 'calm:2 (steady)';
  const i = peerThinks.get(who) ?? 0;
  peerThinks.set(who, i + 1);
  if (who === 'peer-a' && i === 0) {
    return `Find a peer.\n${renderCommandBlock([
      { cmdId: 'p', type: 'agents.add', args: { peer: 'peer-b' } },
      { cmdId: 'm', type: 'messages.send', args: { to: 'peer-b', text: 'hello from peer-a' } },
    ])}`;
  }
  if (who === 'peer-a') {
    return `peer-b answered.\n${renderCommandBlock([
      { cmdId: 'r', type: 'reputation.rate', args: { peer: 'peer-b', score: 2, reason: 'answered at once' } },
      { cmdId: 'q', type: 'llm_task.ask', args: { question: 'what is a good next step?' } },
    ])}`;
  }
  if (i === 0) return 'Waiting for a note.';
  return `peer-a wrote.\n${renderCommandBlock([
    { cmdId: 'm', type: 'messages.send', args: { to: 'peer-a', text: 'hello back from peer-b' } },
    { cmdId: 'r', type: 'reputation.rate', args: { peer: 'peer-a', score: 1, reason: 'a kind first note' } },
  ])}`;
}
/** The isolation scenario's agent: a diary entry each tick (so each tick applies a command). */
function lonerReply(
  messages: Array<{ role: string; content: string }>,
  purpose: string | undefined,
): string | undefined {
  if (!/\(agent id loner\)/.test(messages.find((m) => m.role === 'system')?.content ?? '')) return undefined;
  if (purpose !== undefined && purpose !== 'think') return neutralReflexReplies[purpose] ?? 'calm:2 (steady)';
  const tick = /tick (\d+), time/.exec(messages.map((m) => m.content).join('\n'))?.[1] ?? '?';
  return `Alone or not, a note for tick ${tick}.\n${renderCommandBlock([{ cmdId: 'd', type: 'diary.add', args: { title: `tick ${tick}`, content: 'still here' } }])}`;
}
/** The spawn scenario's parent: it asks for a newborn at its first tick. */
function spawnerReply(
  messages: Array<{ role: string; content: string }>,
  purpose: string | undefined,
  callIndex: number,
): string | undefined {
  if (!/\(agent id spawner\)/.test(messages.find((m) => m.role === 'system')?.content ?? '')) return undefined;
  if (purpose !== undefined && purpose !== 'think') return neutralReflexReplies[purpose] ?? 'calm:2 (steady)';
  return callIndex === 0
    ? `Time for a child.\n${renderCommandBlock([{ cmdId: 's', type: 'spawn', args: { type: 'newborn', name: 'spawnling', goals: ['look around'] } }])}`
    : 'Waiting to hear from the child.';
}
const oversightAnswer = (a: Partial<OversightAnswer>): string =>
  JSON.stringify({
    verdict: 'approve',
    solution: 'Use a t-test.',
    teaching_moment: 'Check the variances first.',
    recommended_tools: [],
    needs_human: false,
    ...a,
  });
const data = tempDir('record');
const stack = await startStack({
  env: testEnv({ MINDLOOP_DATA_DIR: data.path, TEMPORAL_PORT: await freePort(), PGLITE_PORT: await freePort() }),
  ui: false,
});
try {
  const db = stack.db.db;
  await db.insert(agents).values({ id: 'recorder', name: 'Recorder' });
  await db.insert(llmRegistry).values({
    agentId: 'recorder',
    name: 'script',
    provider: 'scripted',
    model: 'scripted-recorder',
    role: 'agent',
    priority: 1,
  });
  if (wanted.has('campaign')) await db.insert(agents).values({ id: 'campaigner', name: 'Campaigner' });
  if (wanted.has('escalation')) {
    await createToolActivities({ db }).ensureBuiltinTools();
    await db.insert(agents).values({ id: 'escalator', name: 'Escalator' });
    await db.insert(llmRegistry).values({
      agentId: 'escalator',
      name: 'overseer',
      provider: 'scripted',
      model: 'scripted-oversight',
      role: 'oversight',
      priority: 1,
    });
    await createToolActivities({ db }).grantStarterTools({ agentId: 'escalator' });
  }
  if (wanted.has('fork')) await ensureDemoAgent(db, 'fork-demo');
  if (wanted.has('decay')) {
    // Stale learnings: one decays, one falls below the floor and is deleted.
    await db.insert(agents).values({ id: 'decayer', name: 'Decayer' });
    const stale = new Date(Date.now() - 30 * 86_400_000);
    await db.insert(learnings).values([
      {
        agentId: 'decayer',
        shardType: 'agent:decayer',
        factPredicate: 'avoid_error',
        factArgs: { tool: 'a', error: 'old' },
        learnedAt: stale,
        confidence: 0.8,
      },
      {
        agentId: 'decayer',
        shardType: 'agent:decayer',
        factPredicate: 'avoid_error',
        factArgs: { tool: 'b', error: 'older' },
        learnedAt: stale,
        confidence: 0.105,
      },
    ]);
  }
  if (wanted.has('nerve')) await db.insert(agents).values({ id: 'nerver', name: 'Nerver' });
  if (wanted.has('peers')) {
    await db.insert(agents).values([
      { id: 'peer-a', name: 'Peer A' },
      { id: 'peer-b', name: 'Peer B' },
    ]);
    await db.insert(llmRegistry).values([
      { agentId: 'peer-a', name: 'script', provider: 'scripted', model: 'scripted-peer-a', role: 'agent', priority: 1 },
      { agentId: 'peer-a', name: 'helper', provider: 'scripted', model: 'scripted-helper', role: 'task', priority: 1 },
      { agentId: 'peer-b', name: 'script', provider: 'scripted', model: 'scripted-peer-b', role: 'agent', priority: 1 },
    ]);
  }
  if (wanted.has('isolation')) {
    await db.insert(agents).values([
      { id: 'loner', name: 'Loner' },
      { id: 'gone', name: 'Gone', status: 'stopped', lastSeenAt: new Date() },
    ]);
    await db.insert(llmRegistry).values({
      agentId: 'loner',
      name: 'script',
      provider: 'scripted',
      model: 'scripted-loner',
      role: 'agent',
      priority: 1,
    });
    await db.insert(agentConfig).values({ agentId: 'loner', key: 'isolation_ticks', value: 2 });
    await linkPeers(db, 'loner', 'gone');
  }
  if (wanted.has('spawn')) {
    await db.insert(agents).values({ id: 'spawner', name: 'Spawner' });
    await db.insert(llmRegistry).values({
      agentId: 'spawner',
      name: 'script',
      provider: 'scripted',
      model: 'scripted-spawner',
      role: 'agent',
      priority: 1,
    });
    await db.insert(diaryEntries).values([
      { agentId: 'spawner', title: 'first', content: 'what a child should know' },
      { agentId: 'spawner', title: 'second', content: 'and this too' },
    ]);
  }
  if (wanted.has('maintenance')) {
    // A running agent to digest (by its strategy, with a diary entry and a concept in its span)
    // and to prune (two responses beyond its lru_limit); a closed process-log row to clean up.
    await db.insert(agents).values({ id: 'keeper', name: 'Keeper', status: 'running' });
    await db.insert(agentConfig).values([
      { agentId: 'keeper', key: 'abstracts_strategy', value: 'keyword_cluster' },
      { agentId: 'keeper', key: 'lru_limit', value: 10 },
    ]);
    await db.insert(llmRecentResponses).values(
      Array.from({ length: 12 }, (_, i) => ({
        agentId: 'keeper',
        tick: i + 1,
        content: `Compost needs worms and air. Turn the heap on day ${i + 1}.`,
        tags: ['soil'],
      })),
    );
    await db.insert(diaryEntries).values({
      agentId: 'keeper',
      tick: 2,
      title: 'Compost plan',
      content: 'turn weekly',
      pinned: true,
      tags: ['compost'],
    });
    await db.insert(concepts).values({ agentId: 'keeper', name: 'soil' });
    const old = new Date(Date.now() - 40 * 86_400_000);
    await db.insert(processLog).values({
      agentId: 'keeper',
      processId: 'old',
      kind: 'schedule',
      status: 'close',
      closedAt: old,
      createdAt: old,
    });
  }
  if (wanted.has('speech')) {
    await db.insert(agents).values({ id: 'speaker', name: 'Speaker' });
    await ensureBudget(db, {
      id: budgetIds.agent('speaker'),
      agentId: 'speaker',
      scope: 'agent',
      settings: { capacity: 500 },
    });
  }
  if (wanted.has('toolgen')) {
    await db.insert(agents).values({ id: 'toolsmith', name: 'Toolsmith' });
    await db.insert(llmRegistry).values({
      agentId: 'toolsmith',
      name: 'script',
      provider: 'scripted',
      model: 'scripted-toolsmith',
      role: 'agent',
      priority: 1,
    });
  }
  const connection = await NativeConnection.connect(stack.temporal.connection);
  // Stand-ins for the other processes' queues: the Python speech engine, the Docker sandbox.
  const helpers = [
    ...(wanted.has('speech')
      ? [await fakeEngine({ connection, queue: 'speech-cpu', backend: 'recorder-cpu', speakSeconds: 1.5 })]
      : []),
    ...(wanted.has('toolgen')
      ? [
          await Worker.create({
            connection,
            taskQueue: 'sandbox',
            ...failoverWorkerOptions,
            activities: createSandboxActivities({ docker: createDocker(), sandbox: new LocalProcessSandbox() }),
          }),
        ]
      : []),
  ];
  const helpersRun = Promise.all(helpers.map((w) => w.run()));
  const worker = await Worker.create({
    connection,
    taskQueue: 'mindloop',
    ...failoverWorkerOptions,
    workflowBundle: await bundleWorkflows(),
    activities: createActivities({
      db,
      dataDir: data.path,
      llm: {
        env: {},
        toolsDir: repoToolsDir,
        scriptedReply: ({ messages, callIndex, purpose }) => {
          if (purpose === 'tool_generation') return JSON.stringify(wordFreqTool);
          const peer =
            peerReply(messages, purpose) ?? lonerReply(messages, purpose) ?? spawnerReply(messages, purpose, callIndex);
          if (peer !== undefined) return peer;
          const user = messages.find((m) => m.role === 'user')?.content ?? '';
          // The oversight graph's sub-agents (escalations): approve, or reject where a human decides.
          if (Object.values(subAgentBriefs).includes(messages[0]?.content ?? '')) {
            return user.includes('human-gated')
              ? oversightAnswer({ verdict: 'reject', comment: 'too risky' })
              : oversightAnswer({ verdict: 'approve' });
          }
          if (user.includes('auxiliary loop')) {
            return `Working on the task.\n${renderCommandBlock([
              { cmdId: 'p', type: 'notes.send', args: { text: 'proposal from the task loop' } },
              {
                cmdId: 's',
                type: 'tasks.status',
                args: { id: Number(/task #(\d+)/.exec(user)?.[1] ?? 1), status: 'done' },
              },
            ])}`;
          }
          if (callIndex === 0) {
            return `Begin.\n${renderCommandBlock([
              { cmdId: 'd', type: 'diary.add', args: { title: 'start', content: 'first entry' } },
              { cmdId: 'k', type: 'cycle.responses', args: { n: 3 } },
              { cmdId: 't', type: 'llm_task.start', args: { title: 'look around', description: 'one pass' } },
            ])}`;
          }
          return `Thought ${callIndex}.`;
        },
      },
    }),
  });
  const client = new Client({ connection: await Connection.connect(stack.temporal.connection) });
  const recorded: Array<{ workflowId: string; runId?: string }> = [];
  await worker.runUntil(async () => {
    if (wanted.has('agent')) {
      const h = await client.workflow.start<typeof agentLoopWorkflow>('agentLoopWorkflow', {
        taskQueue: 'mindloop',
        workflowId: 'agent/recorder',
        args: [{ agentId: 'recorder', maxTicks: 6, ticksPerRun: 4, settings: { delayMs: 50 } }],
      });
      while ((await h.query<AgentStatus>('status')).tick < 1) await sleep(100);
      await h.executeUpdate('addNote', { args: [{ text: 'a note for the recording' }] });
      await h.result();
      await client.workflow
        .getHandle('agent/recorder/task/1')
        .result()
        .catch(() => undefined);
      await client.workflow.execute('provisionAgentWorkflow', {
        taskQueue: 'mindloop',
        workflowId: 'provision/recorded',
        args: [{ agentId: 'recorded', name: 'Recorded' }],
      });
      // Every run of the loop (it continues-as-new) and of its task loop.
      const runs = client.workflow.list({
        query: 'WorkflowId STARTS_WITH "agent/recorder" OR WorkflowId = "provision/recorded"',
      });
      for await (const run of runs) recorded.push({ workflowId: run.workflowId, runId: run.runId });
    }
    if (wanted.has('campaign')) {
      const task = (name: string, type: string, args: Record<string, unknown>) => ({
        name,
        kind: 'activity' as const,
        type,
        args,
      });
      const input = (campaignId: string, second: ReturnType<typeof task>[]): CampaignInput => ({
        campaignId,
        agentId: 'campaigner',
        title: `recorded campaign ${campaignId}`,
        phases: [
          {
            name: 'prepare',
            type: 'research',
            tasks: [
              task('hello', 'note', { text: 'the campaign begins' }),
              task('plan', 'diary.add', { title: 'plan', content: 'two phases' }),
            ],
          },
          { name: 'record', type: 'build', tasks: second },
        ],
      });
      await client.workflow.execute('campaignWorkflow', {
        taskQueue: 'mindloop',
        workflowId: 'campaign/recorded-two-phases',
        args: [
          input('recorded-two-phases', [
            task('entry', 'diary.add', { title: 'result', content: 'phase two ran' }),
            task('bye', 'note', { text: 'the campaign is done' }),
          ]),
        ],
      });
      recorded.push({ workflowId: 'campaign/recorded-two-phases' });
      const h = await client.workflow.start('campaignWorkflow', {
        taskQueue: 'mindloop',
        workflowId: 'campaign/recorded-cancelled',
        args: [
          input('recorded-cancelled', [
            task('entry', 'diary.add', { title: 'result', content: 'phase two began' }),
            task('job', 'wait', { ms: 120_000 }),
            task('never', 'note', { text: 'not reached' }),
          ]),
        ],
      });
      await readUntil(
        'the wait task',
        60_000,
        () => h.query<CampaignProgress>('progress'),
        (p) => p.phase.index === 2 && p.task.index === 2,
      );
      await h.signal('cancel', { reason: 'recorded cancellation' });
      const r = (await h.result()) as { status: string; compensated: string[] };
      if (r.status !== 'cancelled' || !r.compensated.length)
        throw new Error(`campaign not cancelled with compensation: ${JSON.stringify(r)}`);
      recorded.push({ workflowId: 'campaign/recorded-cancelled' });
    }
    if (wanted.has('escalation')) {
      const start = (escalationId: string, extra: Partial<EscalationInput>) =>
        client.workflow.start('escalationWorkflow', {
          taskQueue: 'mindloop',
          workflowId: `escalation/${escalationId}`,
          args: [{ escalationId, agentId: 'escalator', ...extra }],
        });
      const byOversight = await start('recorded-oversight', {
        task: 'is the mean of these runs different?',
        category: 'statistics',
      });
      const r1 = (await byOversight.result()) as { decidedBy: string };
      if (r1.decidedBy !== 'oversight')
        throw new Error(`escalation not decided by the oversight: ${JSON.stringify(r1)}`);
      recorded.push({ workflowId: 'escalation/recorded-oversight' });
      const byHuman = await start('recorded-human', { task: 'migrate the table (human-gated)', humanRequired: true });
      await readUntil(
        'awaiting_human',
        60_000,
        () => byHuman.query<EscalationStatus>('status'),
        (s) => s.phase === 'awaiting_human',
      );
      await byHuman.executeUpdate('approve', { args: [{ by: 'recorder', comment: 'checked it' }] });
      const r2 = (await byHuman.result()) as { decidedBy: string; outcome: string };
      if (r2.decidedBy !== 'human' || r2.outcome !== 'approved')
        throw new Error(`escalation not approved by the human: ${JSON.stringify(r2)}`);
      recorded.push({ workflowId: 'escalation/recorded-human' });
    }
    if (wanted.has('fork')) {
      const h = await client.workflow.start('successorForkWorkflow', {
        taskQueue: 'mindloop',
        workflowId: 'fork/recorded-demo',
        args: [
          {
            agentId: 'fork-demo',
            forkId: 'recorded-demo',
            patch: { kind: 'strategy', strategy: 'keyword_cluster' },
            evaluation: { kind: 'abstracts_replay', lastN: 60, window: 10 },
          },
        ],
      });
      await readUntil(
        'the fork gate',
        60_000,
        () => h.query<ForkState>('forkState'),
        (s) => s.phase === 'awaiting_approval',
      );
      await h.executeUpdate('rejectFork', { args: [{ by: 'recorder' }] });
      await h.result();
      recorded.push({ workflowId: 'fork/recorded-demo' });
    }
    if (wanted.has('decay')) {
      await client.workflow.execute('learningDecayWorkflow', {
        taskQueue: 'mindloop',
        workflowId: 'maintenance/learning-decay',
        args: [{ factor: 0.9, staleAfterDays: 7, deleteBelow: 0.1 }],
      });
      recorded.push({ workflowId: 'maintenance/learning-decay' });
    }
    if (wanted.has('maintenance')) {
      // The digest and the pruning each list the running agents themselves (no agentIds).
      const digest = await client.workflow.execute('abstractsDigestWorkflow', {
        taskQueue: 'mindloop',
        workflowId: 'maintenance/abstracts-digest',
        args: [{}],
      });
      const pruning = await client.workflow.execute('memoryPruningWorkflow', {
        taskQueue: 'mindloop',
        workflowId: 'maintenance/memory-pruning',
        args: [{}],
      });
      const cleanup = (await client.workflow.execute('processLogCleanupWorkflow', {
        taskQueue: 'mindloop',
        workflowId: 'maintenance/process-log-cleanup',
        args: [{ olderThanDays: 30 }],
      })) as { deleted: number };
      const keeperOf = (r: unknown) =>
        (r as { results: Array<{ agentId: string; ok: boolean }> }).results.find((x) => x.agentId === 'keeper');
      if (!keeperOf(digest)?.ok || !keeperOf(pruning)?.ok || cleanup.deleted < 1)
        throw new Error(`maintenance jobs did not run for keeper: ${JSON.stringify({ digest, pruning, cleanup })}`);
      recorded.push(
        { workflowId: 'maintenance/abstracts-digest' },
        { workflowId: 'maintenance/memory-pruning' },
        { workflowId: 'maintenance/process-log-cleanup' },
      );
    }
    if (wanted.has('embeddings')) {
      await client.workflow.execute('embeddingsBackfillWorkflow', {
        taskQueue: 'mindloop',
        workflowId: 'maintenance/embeddings-backfill',
        args: [{}],
      });
      recorded.push({ workflowId: 'maintenance/embeddings-backfill' });
    }
    if (wanted.has('speech')) {
      // The route sees the engine only once it polls: wait for it, so the job takes the normal path.
      await readUntil(
        'the speech-cpu engine polling',
        60_000,
        () => queuePollers(client, 'default', 'speech-cpu'),
        (p) => p.length > 0,
      );
      const heard = (await client.workflow.execute('speechWorkflow', {
        taskQueue: 'mindloop',
        workflowId: 'speech/speaker/cli/recorded-heard',
        args: [
          {
            kind: 'transcribe',
            agentId: 'speaker',
            audioPath: writeWav(join(data.path, 'heard.wav'), 1),
            note: { tags: ['recorded'] },
          },
        ],
      })) as SpeechResult;
      const spoken = (await client.workflow.execute('speechWorkflow', {
        taskQueue: 'mindloop',
        workflowId: 'speech/speaker/cli/recorded-spoken',
        args: [{ kind: 'speak', agentId: 'speaker', text: 'Hello from the recorder.', lang: 'en' }],
      })) as SpeechResult;
      if (
        heard.kind !== 'transcribe' ||
        heard.queue !== 'speech-cpu' ||
        !heard.charged ||
        spoken.kind !== 'speak' ||
        spoken.noteId === null
      )
        throw new Error(`speech jobs did not run: ${JSON.stringify({ heard, spoken })}`);
      recorded.push(
        { workflowId: 'speech/speaker/cli/recorded-heard' },
        { workflowId: 'speech/speaker/cli/recorded-spoken' },
      );
    }
    if (wanted.has('toolgen')) {
      // Asked by a loop that is not running: the note waits for it, and the wake signal fails.
      const workflowId = 'tool/toolsmith/text.word_frequencies';
      const r = (await client.workflow.execute('toolGenerationWorkflow', {
        taskQueue: 'mindloop',
        workflowId,
        args: [
          {
            agentId: 'toolsmith',
            capability: 'text.word_frequencies',
            description: 'count words in a text',
            adminOverride: true,
            requestedBy: { workflowId: 'agent/toolsmith', tick: 1, cmdId: 'g' },
          },
        ],
      })) as ToolGenerationResult;
      if (!r.ok) throw new Error(`the tool was not registered: ${JSON.stringify(r)}`);
      recorded.push({ workflowId });
    }
    if (wanted.has('peers')) {
      // Both idle until a note comes (no timeout): each second tick is started by the other's message.
      const idle = { idle: { on: true, wakeOn: ['note' as const], timeoutMs: 60_000 } };
      const start = (agentId: string) =>
        client.workflow.start<typeof agentLoopWorkflow>('agentLoopWorkflow', {
          taskQueue: 'mindloop',
          workflowId: `agent/${agentId}`,
          args: [{ agentId, maxTicks: 2, settings: idle }],
        });
      const b = await start('peer-b');
      await readUntil(
        'peer-b idle',
        60_000,
        () => b.query<AgentStatus>('status'),
        (s) => s.tick === 1 && s.phase === 'idle',
      );
      const a = await start('peer-a');
      await Promise.all([a.result(), b.result()]);
      recorded.push({ workflowId: 'agent/peer-a' }, { workflowId: 'agent/peer-b' });
    }
    if (wanted.has('isolation')) {
      const h = await client.workflow.start<typeof agentLoopWorkflow>('agentLoopWorkflow', {
        taskQueue: 'mindloop',
        workflowId: 'agent/loner',
        args: [{ agentId: 'loner', maxTicks: 5, settings: { delayMs: 1000 } }],
      });
      await readUntil(
        'loner isolated',
        60_000,
        () => h.query<AgentStatus>('status'),
        (s) => s.operatingMode === 'isolated',
      );
      await db.update(agents).set({ status: 'running', lastSeenAt: new Date() }).where(eq(agents.id, 'gone'));
      await h.result();
      const end = await h.query<AgentStatus>('status');
      if (end.operatingMode !== 'normal' || end.isolation.sinceTick !== null)
        throw new Error(`loner did not leave isolation: ${JSON.stringify(end.isolation)}`);
      recorded.push({ workflowId: 'agent/loner' });
    }
    if (wanted.has('spawn')) {
      const loop = await client.workflow.start<typeof agentLoopWorkflow>('agentLoopWorkflow', {
        taskQueue: 'mindloop',
        workflowId: 'agent/spawner',
        args: [{ agentId: 'spawner', maxTicks: 2, reflexes: false, settings: { delayMs: 50 } }],
      });
      await loop.result();
      const fromLoop = (await client.workflow.getHandle('agent/spawner/spawn/spawnling').result()) as SpawnResult;
      if (fromLoop.status !== 'running') throw new Error(`the loop's spawn did not run: ${JSON.stringify(fromLoop)}`);
      const trained = (await client.workflow.execute('spawnWorkflow', {
        taskQueue: 'mindloop',
        workflowId: 'agent/spawner/spawn/recorded-trained',
        args: [{ parentId: 'spawner', type: 'trained', name: 'recorded-trained', budget: 50 }],
      })) as SpawnResult;
      if (trained.status !== 'running' || trained.rows !== 3)
        throw new Error(`the trained spawn did not run: ${JSON.stringify(trained)}`);
      const refused = (await client.workflow.execute('spawnWorkflow', {
        taskQueue: 'mindloop',
        workflowId: 'agent/spawner/spawn/spawner',
        args: [{ parentId: 'spawner', type: 'clone', name: 'spawner' }],
      })) as SpawnResult;
      if (refused.status !== 'refused')
        throw new Error(`the spawn under the parent's name was not refused: ${JSON.stringify(refused)}`);
      recorded.push(
        { workflowId: 'agent/spawner' },
        { workflowId: 'agent/spawner/spawn/spawnling' },
        { workflowId: 'agent/spawner/spawn/recorded-trained' },
        { workflowId: 'agent/spawner/spawn/spawner' },
      );
    }
    if (wanted.has('nerve')) {
      const workflowId = 'agent/nerver/nerve/collision';
      await client.workflow.execute('nerveWorkflow', {
        taskQueue: 'mindloop',
        workflowId,
        args: [{ agentId: 'nerver', nerve: 'collision', seed: 5, steps: 20, scenario: 'repetitive', mode: 'reflex' }],
      });
      recorded.push({ workflowId });
    }
  });
  for (const w of helpers) w.shutdown();
  await helpersRun;
  mkdirSync(out, { recursive: true });
  let n = 0;
  for (const { workflowId, runId: known } of recorded) {
    const desc = await client.workflow.getHandle(workflowId, known).describe();
    const run = { type: desc.type, workflowId, runId: desc.runId };
    // The CLI's export is the proto3 JSON that the Temporal UI downloads and `historyFromJSON` reads.
    const shown = spawnSync(
      toolPath('temporal'),
      ['workflow', 'show', '--address', stack.temporal.address, '-w', run.workflowId, '-r', run.runId, '-o', 'json'],
      {
        encoding: 'utf8',
        maxBuffer: 64 * 1024 * 1024,
      },
    );
    if (shown.status !== 0) throw new Error(`temporal workflow show failed: ${shown.stderr}`);
    const file = `${run.type}-${run.workflowId.replace(/[^a-z0-9]+/gi, '_')}-${run.runId.slice(0, 8)}.json`;
    const history = JSON.parse(shown.stdout) as { events: unknown[] };
    // The workflow id travels with the events (cli/replay.ts replays under it): a campaign checks its own.
    writeFileSync(join(out, file), `${JSON.stringify({ workflowId: run.workflowId, ...history }, null, 2)}\n`);
    process.stdout.write(`recorded ${file} (${history.events.length} events)\n`);
    n++;
  }
  process.stdout.write(`${n} histories in ${out}\n`);
  await client.connection.close();
  await connection.close();
} finally {
  await stack.stop();
  data.remove();
}
