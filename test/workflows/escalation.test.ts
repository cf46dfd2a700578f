/**
 * escalationWorkflow on the time-skipping server with the real activities on the real
 * Postgres and the real LLM router (scripted `oversight` rows; the reply function plays the
 * oversight model). Design tests really run (`node --test`) through the local stand-in of the
 * sandbox on the `sandbox` queue. Covers: routing per category, every conflict rule, the
 * deadline (WAIT, WAIT through grace, then deny), a danger-zone action blocked until approved,
 * a tool granted through an escalation, a design round that fails then passes, bad input.
 */
import { WorkflowFailedError, WorkflowUpdateFailedError } from '@temporalio/client';
import { and, asc, eq } from 'drizzle-orm';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createActivities } from '../../activities/index.js';
import type { ScriptedReplyFn } from '../../activities/llm/index.js';
import { createToolActivities } from '../../activities/tools.js';
import { createCommandActivities } from '../../activities/tick/apply-commands.js';
import type { EscalationInput, OversightAnswer } from '../../core/escalation.js';
import { subAgentBriefs } from '../../core/escalation.js';
import {
  agents,
  decisionLog,
  discoveredTools,
  escalations,
  learnings,
  llmCalls,
  llmRegistry,
  notes,
  partnershipMessages,
  preferenceCounts,
  processLog,
  toolRegistry,
  toolTransitions,
} from '../../db/schema/index.js';
import { loadLearnings } from '../../db/queries/learnings.js';
import { learningLine } from '../../core/learnings.js';
import type { SandboxRunRequest } from '../../sandbox/sandbox.js';
import {
  approveUpdate,
  escalationStatusQuery,
  nudgeUpdate,
  rejectUpdate,
  vetoUpdate,
  type escalationWorkflow,
} from '../../workflows/escalation.js';
import { escalationMetrics } from '../../db/queries/escalation-metrics.js';
import { migratedDatabase, repoToolsDir, toolPath, type MigratedDatabase } from '../helpers/env.js';
import { run, tsxBin } from '../helpers/spawn.js';
import { LocalProcessSandbox } from '../helpers/local-sandbox.js';
import { startWorkers, untilQuery, type RunningWorkers } from '../helpers/harness.js';
import { timeSkippingSuite } from '../helpers/temporal.js';

const suite = timeSkippingSuite();
let handle: MigratedDatabase;
let dbUrl: string;
let workers: RunningWorkers;
const sandboxRuns: SandboxRunRequest[] = [];
/** The oversight model of the current test. */
let script: ScriptedReplyFn = () => 'no script';
const taskQueue = 'escalation-test';

/** Resolved unless a test holds openEscalation back. */
let holdOpen: Promise<void> = Promise.resolve();

beforeAll(async () => {
  handle = await migratedDatabase('mindloop_escalation', 10);
  dbUrl = handle.url;
  await createToolActivities({ db: handle.db }).ensureBuiltinTools();
  const acts = createActivities({
    db: handle.db,
    llm: { env: {}, toolsDir: repoToolsDir, scriptedReply: (i) => script(i) },
  });
  // A test may hold the escalation's first write back (an answer racing the opening).
  const openEscalation: typeof acts.openEscalation = async (i) => {
    await holdOpen;
    return acts.openEscalation(i);
  };
  const local = new LocalProcessSandbox();
  workers = await startWorkers(suite.env, [
    { taskQueue, workflowBundle: suite.bundle, activities: { ...acts, openEscalation } },
    {
      taskQueue: 'sandbox',
      activities: { sandboxRun: async (req: SandboxRunRequest) => (sandboxRuns.push(req), local.run(req)) },
    },
  ]);
}, 120_000);
afterAll(async () => {
  await workers?.stop();
  await handle?.dispose();
});

async function seedAgent(id: string) {
  const db = handle.db;
  await db.insert(agents).values({ id, name: id });
  await db.insert(llmRegistry).values({
    agentId: id,
    name: 'overseer',
    provider: 'scripted',
    model: 'scripted-oversight',
    role: 'oversight',
    priority: 1,
  });
  await createToolActivities({ db }).grantStarterTools({ agentId: id });
}

const answer = (a: Partial<OversightAnswer> = {}): string =>
  JSON.stringify({
    verdict: 'approve',
    solution: 'Use a t-test.',
    teaching_moment: 'Check the variances first.',
    recommended_tools: [],
    needs_human: false,
    ...a,
  });
let seq = 0;
function start(input: Omit<EscalationInput, 'escalationId'> & { escalationId?: string }) {
  const escalationId = input.escalationId ?? `esc-${++seq}`;
  return suite.env.client.workflow.start<typeof escalationWorkflow>('escalationWorkflow', {
    taskQueue,
    workflowId: `escalation/${escalationId}`,
    args: [{ ...input, escalationId }],
  });
}
const row = async (id: string) =>
  (await handle.db.select().from(decisionLog).where(eq(decisionLog.escalationId, id)))[0]!;

describe('escalationWorkflow (time-skipping, Postgres, scripted oversight)', () => {
  it('routes each category to its sub-agent; the oversight decides when no human is required; the answer reaches the agent', async () => {
    await seedAgent('router');
    const seen: string[] = [];
    script = ({ messages }) => {
      const brief = Object.entries(subAgentBriefs).find(([, b]) => b === messages[0]!.content)?.[0] ?? 'unknown';
      seen.push(brief);
      return answer({ solution: `answer from ${brief}` });
    };
    const categories = ['statistics', 'code', 'visualization', 'state_machine_designer', 'general'] as const;
    for (const category of categories) {
      const h = await start({
        agentId: 'router',
        task: `help with ${category}`,
        category,
        escalationId: `route-${category}`,
      });
      const r = await h.result();
      expect(r).toMatchObject({ outcome: 'approved', decidedBy: 'oversight' });
      const [esc] = await handle.db
        .select()
        .from(escalations)
        .where(eq(escalations.id, `route-${category}`));
      expect(esc).toMatchObject({
        status: 'resolved',
        decidedBy: 'oversight',
        solution: `answer from ${category}`,
        teachingMoment: 'Check the variances first.',
      });
      const [call] = await handle.db
        .select()
        .from(llmCalls)
        .where(eq(llmCalls.requestKey, `escalation/route-${category}/r1/${category}/a1`));
      expect(call).toMatchObject({ purpose: `oversight:${category}`, agentId: 'router' });
    }
    expect(seen).toEqual([...categories]);
    // Delivered: a partnership message and an incoming note per escalation.
    const msgs = await handle.db
      .select()
      .from(partnershipMessages)
      .where(
        and(
          eq(partnershipMessages.agentId, 'router'),
          eq(partnershipMessages.toTier, 'agent'),
          eq(partnershipMessages.kind, 'approval'),
        ),
      );
    expect(msgs).toHaveLength(5);
    const inbox = await handle.db.select().from(notes).where(eq(notes.agentId, 'router')).orderBy(asc(notes.id));
    expect(inbox).toHaveLength(5);
    expect(inbox[0]).toMatchObject({ direction: 'in', source: 'oversight', tags: ['escalation', 'statistics'] });
    expect(inbox[0]!.text).toContain('Teaching moment: Check the variances first.');
  }, 60_000);

  it('human veto > oversight approval', async () => {
    await seedAgent('veto');
    script = () => answer({ verdict: 'approve' });
    const h = await start({ agentId: 'veto', task: 'drop the cache', humanRequired: true, escalationId: 'veto-1' });
    await untilQuery(h, escalationStatusQuery, (s) => s.oversight?.verdict === 'approve', "the oversight's approval");
    const s = await h.executeUpdate(vetoUpdate, { args: [{ by: 'dafit', reason: 'not on a Friday' }] });
    expect(s.human).toEqual({ verdict: 'veto', by: 'dafit' });
    expect(await h.result()).toMatchObject({
      outcome: 'denied',
      decidedBy: 'human',
      why: 'human veto overrides the oversight approval',
      grantedTools: [],
    });
    expect(await row('veto-1')).toMatchObject({
      oversightAnswer: 'approve',
      humanAnswer: 'veto',
      humanComment: 'not on a Friday',
      outcome: 'blocked',
    });
    // No later human answer is accepted.
    await expect(h.executeUpdate(approveUpdate, { args: [{ by: 'eve' }] })).rejects.toThrow();
  });

  it('human approval > oversight (a rejection by the oversight is overridden)', async () => {
    await seedAgent('appr');
    script = () => answer({ verdict: 'reject', comment: 'too risky' });
    const h = await start({ agentId: 'appr', task: 'migrate the table', humanRequired: true, escalationId: 'appr-1' });
    await untilQuery(
      h,
      escalationStatusQuery,
      (s) => s.phase === 'awaiting_human',
      'the escalation to wait for a human',
    );
    await h.executeUpdate(approveUpdate, { args: [{ by: 'dafit', comment: 'I checked it' }] });
    expect(await h.result()).toMatchObject({
      outcome: 'approved',
      decidedBy: 'human',
      why: "human approve (overrides the oversight's reject)",
    });
    expect(await row('appr-1')).toMatchObject({
      oversightAnswer: 'reject',
      humanAnswer: 'approve',
      outcome: 'executed',
    });
  });

  it('human reject and human nudge decide too; the nudge becomes a learning moment', async () => {
    await seedAgent('rn');
    script = () => answer({ verdict: 'approve' });
    const r1 = await start({ agentId: 'rn', task: 'a', humanRequired: true, escalationId: 'rn-1' });
    await untilQuery(
      r1,
      escalationStatusQuery,
      (s) => s.phase === 'awaiting_human',
      'the escalation to wait for a human',
    );
    await r1.executeUpdate(rejectUpdate, { args: [{ by: 'dafit', reason: 'wrong goal' }] });
    expect(await r1.result()).toMatchObject({ outcome: 'denied', decidedBy: 'human' });
    const r2 = await start({ agentId: 'rn', task: 'b', humanRequired: true, escalationId: 'rn-2' });
    await untilQuery(
      r2,
      escalationStatusQuery,
      (s) => s.phase === 'awaiting_human',
      'the escalation to wait for a human',
    );
    await r2.executeUpdate(nudgeUpdate, { args: [{ by: 'dafit', text: 'try the median first' }] });
    const res = await r2.result();
    expect(res).toMatchObject({ outcome: 'nudged', decidedBy: 'human' });
    // The nudge is a learning moment: a `nudge` learning in the agent's shard of the autopoiesis store.
    expect(res.learning).toEqual({ id: expect.any(Number) });
    const [learned] = await handle.db
      .select()
      .from(learnings)
      .where(eq(learnings.id, (res.learning as { id: number }).id));
    expect(learned).toMatchObject({
      shardType: 'agent:rn',
      agentId: 'rn',
      factPredicate: 'nudge',
      factArgs: { category: 'general', hint: 'try the median first' },
      sourceCampaign: 'escalation/rn-2',
    });
    const loaded = await loadLearnings(handle.db, { agentId: 'rn' });
    expect(loaded.map(learningLine)).toContainEqual(expect.stringContaining('nudged on general: try the median first'));
    const [m] = await handle.db
      .select()
      .from(partnershipMessages)
      .where(
        and(
          eq(partnershipMessages.escalationId, 'rn-2'),
          eq(partnershipMessages.toTier, 'agent'),
          eq(partnershipMessages.kind, 'nudge'),
        ),
      );
    expect(m!.body).toContain('Human: try the median first');
    // decision_log keeps the human's nudge as such (not 'none').
    expect(await row('rn-2')).toMatchObject({
      oversightAnswer: 'approve',
      humanAnswer: 'nudge',
      humanComment: 'try the median first',
      outcome: 'executed',
    });
  });

  it('an oversight nudge decides when no human is required', async () => {
    await seedAgent('onudge');
    script = () => answer({ verdict: 'nudge', comment: 'look at the outliers' });
    const h = await start({
      agentId: 'onudge',
      task: 'mean looks off',
      category: 'statistics',
      escalationId: 'onudge-1',
    });
    const r = await h.result();
    expect(r).toMatchObject({ outcome: 'nudged', decidedBy: 'oversight', learning: { id: expect.any(Number) } });
    expect(await row('onudge-1')).toMatchObject({ oversightAnswer: 'nudge', humanAnswer: 'none' });
    const [learned] = await handle.db
      .select()
      .from(learnings)
      .where(eq(learnings.id, (r.learning as { id: number }).id));
    expect(learned).toMatchObject({
      shardType: 'agent:onudge',
      factPredicate: 'nudge',
      factArgs: { category: 'statistics', hint: 'look at the outliers' },
    });
  });

  it('human required and silent: WAIT until the deadline, WAIT through the grace period, then deny (never approve)', async () => {
    await seedAgent('silent');
    script = () => answer({ verdict: 'approve' });
    const h = await start({
      agentId: 'silent',
      task: 'reboot the host',
      humanRequired: true,
      deadlineMs: 60_000,
      graceMs: 30_000,
      escalationId: 'silent-1',
    });
    await untilQuery(
      h,
      escalationStatusQuery,
      (s) => s.phase === 'awaiting_human',
      'the escalation to wait for a human',
    );
    await suite.env.sleep(65_000);
    expect((await h.query(escalationStatusQuery)).phase).toBe('waiting');
    expect((await h.query(escalationStatusQuery)).decision).toBeNull();
    expect(await h.result()).toMatchObject({ outcome: 'denied', decidedBy: 'default' });
    const [esc] = await handle.db.select().from(escalations).where(eq(escalations.id, 'silent-1'));
    expect(esc).toMatchObject({ status: 'timed_out', decidedBy: 'default' });
    expect(esc!.deadlineAt?.getTime()).toBe((await h.describe()).startTime.getTime() + 60_000);
    expect(await row('silent-1')).toMatchObject({
      oversightAnswer: 'approve',
      humanAnswer: 'none',
      outcome: 'blocked',
    });
  });

  it('a human required only by the oversight (needs_human): the deadline is recorded when the wait starts, then WAIT and deny', async () => {
    await seedAgent('asks');
    script = () => answer({ verdict: 'approve', needs_human: true });
    const h = await start({
      agentId: 'asks',
      task: 'delete the old runs',
      deadlineMs: 120_000,
      graceMs: 0,
      escalationId: 'asks-1',
    });
    await untilQuery(
      h,
      escalationStatusQuery,
      (s) => s.phase === 'awaiting_human',
      'the escalation to wait for a human',
    );
    const startedAt = (await h.describe()).startTime.getTime();
    await expect
      .poll(async () =>
        (await handle.db.select().from(escalations).where(eq(escalations.id, 'asks-1')))[0]?.deadlineAt?.getTime(),
      )
      .toBe(startedAt + 120_000);
    const [waiting] = await handle.db.select().from(escalations).where(eq(escalations.id, 'asks-1'));
    expect(waiting).toMatchObject({ status: 'awaiting_human' });
    expect(await h.result()).toMatchObject({ outcome: 'denied', decidedBy: 'default' });
  });

  it('a danger-zone tool action is blocked until a human approves it, then executed', async () => {
    await seedAgent('danger');
    const db = handle.db;
    const tools = createToolActivities({ db });
    const machine = {
      name: 'runner',
      description: 'run containers',
      initial: 'READY',
      states: {
        READY: {
          description: 'ready',
          actions: { run: { description: 'run an image', args: { image: 'image', privileged: 'bool' } } },
        },
      },
    };
    const [t] = await db
      .insert(toolRegistry)
      .values({ name: 'runner', kind: 'designed', status: 'active', spec: { machine } })
      .returning();
    await db.insert(discoveredTools).values({ agentId: 'danger', toolId: t!.id, via: 'design' });
    const args = { image: 'alpine', privileged: true };
    const held = await tools.callTool({
      agentId: 'danger',
      tool: 'runner',
      action: 'run',
      args,
      key: 'danger/tick1/c1',
    });
    expect(held).toMatchObject({ ok: false, refused: 'held', dangerFlags: ['privileged_container'] });
    script = () => answer({ verdict: 'approve', solution: 'fine by me' });
    const h = await start({
      agentId: 'danger',
      task: 'run a privileged container',
      proposal: { kind: 'tool', name: 'runner.run', args },
      dangerFlags: held.ok ? [] : held.dangerFlags!,
      escalationId: 'danger-1',
    });
    await untilQuery(
      h,
      escalationStatusQuery,
      (s) => s.phase === 'awaiting_human',
      'the escalation to wait for a human',
    );
    await suite.env.sleep(3_600_000); // an hour later, still blocked: the oversight's approval is not enough
    expect((await h.query(escalationStatusQuery)).decision).toBeNull();
    expect(
      await db
        .select()
        .from(toolTransitions)
        .where(and(eq(toolTransitions.agentId, 'danger'), eq(toolTransitions.result, 'ok'))),
    ).toEqual([]);
    await h.executeUpdate(approveUpdate, { args: [{ by: 'dafit' }] });
    expect(await h.result()).toMatchObject({ outcome: 'approved', decidedBy: 'human', proposalOutcome: 'executed' });
    const [ran] = await db
      .select()
      .from(toolTransitions)
      .where(and(eq(toolTransitions.agentId, 'danger'), eq(toolTransitions.result, 'ok')));
    expect(ran).toMatchObject({
      tool: 'runner',
      action: 'run',
      approvedBy: 'danger-1',
      dangerFlags: ['privileged_container'],
    });
    expect(await row('danger-1')).toMatchObject({
      dangerFlags: ['privileged_container'],
      oversightAnswer: 'approve',
      humanAnswer: 'approve',
      outcome: 'executed',
    });

    // Rejected: never executed.
    const h2 = await start({
      agentId: 'danger',
      task: 'again',
      proposal: { kind: 'tool', name: 'runner.run', args },
      dangerFlags: ['privileged_container'],
      escalationId: 'danger-2',
    });
    await untilQuery(
      h2,
      escalationStatusQuery,
      (s) => s.phase === 'awaiting_human',
      'the escalation to wait for a human',
    );
    await h2.executeUpdate(rejectUpdate, { args: [{ by: 'dafit', reason: 'no' }] });
    expect(await h2.result()).toMatchObject({ outcome: 'denied', proposalOutcome: 'blocked' });
    expect(
      await db
        .select()
        .from(toolTransitions)
        .where(and(eq(toolTransitions.agentId, 'danger'), eq(toolTransitions.result, 'ok'))),
    ).toHaveLength(1);
    // The human's rejection of the held action is feedback, counted once (the approval was not).
    const counts = await db.select().from(preferenceCounts).where(eq(preferenceCounts.agentId, 'danger'));
    expect(counts.map((c) => ({ kind: c.kind, pattern: c.pattern, count: c.count }))).toEqual([
      { kind: 'reject', pattern: 'tool.runner:no', count: 1 },
    ]);
  });

  it('a danger-zone shell command is held (not run) until a human approves it, then runs in the sandbox', async () => {
    await seedAgent('sheller');
    const db = handle.db;
    // Harmless when run (it only prints), but its text trips ssh_without_auth.
    const command = 'echo ssh -o StrictHostKeyChecking=no backup@nas uptime';
    const cmds = createCommandActivities({ db });
    const [held] = await cmds.applyCommands({
      agentId: 'sheller',
      tick: 4,
      workflowId: 'agent/sheller',
      mode: 'main',
      commands: [{ cmdId: 'c1', type: 'shell', args: { command } }],
    });
    expect(held).toMatchObject({
      status: 'rejected',
      message: expect.stringContaining('held for human approval (ssh_without_auth)'),
    });
    const escalate = held!.effects.find((e) => e.kind === 'escalate')!;
    expect(escalate).toMatchObject({
      escalationId: 'sheller.t4.c1',
      input: {
        humanRequired: true,
        dangerFlags: ['ssh_without_auth'],
        proposal: { kind: 'command', name: 'shell', args: { command } },
      },
    });
    expect(await db.select().from(processLog).where(eq(processLog.agentId, 'sheller'))).toEqual([]);

    script = () => answer({ verdict: 'approve', solution: 'a backup check is fine' });
    const runsBefore = sandboxRuns.length;
    const h = await suite.env.client.workflow.start<typeof escalationWorkflow>('escalationWorkflow', {
      taskQueue,
      workflowId: 'escalation/sheller.t4.c1',
      args: [escalate.input as EscalationInput],
    });
    await untilQuery(
      h,
      escalationStatusQuery,
      (s) => s.phase === 'awaiting_human',
      'the escalation to wait for a human',
    );
    await suite.env.sleep(7_200_000); // the oversight approved; without a human it stays held
    expect((await h.query(escalationStatusQuery)).decision).toBeNull();
    expect(sandboxRuns.length).toBe(runsBefore);
    await h.executeUpdate(approveUpdate, { args: [{ by: 'dafit', comment: 'the NAS is ours' }] });
    const r = await h.result();
    expect(r).toMatchObject({ outcome: 'approved', decidedBy: 'human', proposalOutcome: 'executed' });
    expect(sandboxRuns.slice(runsBefore).map((x) => x.command)).toEqual([['sh', '-c', command]]);
    const [proc] = await db.select().from(processLog).where(eq(processLog.agentId, 'sheller'));
    expect(proc).toMatchObject({ kind: 'shell', status: 'close' });
    const [note] = await db.select().from(notes).where(eq(notes.id, r.noteId));
    expect(note!.text).toContain('Your proposed action: executed');
    expect(note!.text).toContain('ssh -o StrictHostKeyChecking=no backup@nas uptime');
    expect(await row('sheller.t4.c1')).toMatchObject({
      dangerFlags: ['ssh_without_auth'],
      humanAnswer: 'approve',
      outcome: 'executed',
    });
  });

  it('an undiscovered tool is granted through an escalation, then callable', async () => {
    await seedAgent('learner');
    const tools = createToolActivities({ db: handle.db });
    expect(
      await tools.callTool({ agentId: 'learner', tool: 'database', action: 'connect', key: 'learner/1' }),
    ).toMatchObject({ ok: false, refused: 'undiscovered' });
    script = () => answer({ recommended_tools: ['database', 'no_such_tool'] });
    const r = await (
      await start({ agentId: 'learner', task: 'I need to read my notes', escalationId: 'learner-1' })
    ).result();
    expect(r.grantedTools).toEqual(['database']);
    const [d] = await handle.db
      .select()
      .from(discoveredTools)
      .innerJoin(toolRegistry, eq(toolRegistry.id, discoveredTools.toolId))
      .where(and(eq(discoveredTools.agentId, 'learner'), eq(toolRegistry.name, 'database')));
    expect(d!.discovered_tools).toMatchObject({ via: 'escalation', escalationId: 'learner-1' });
    expect(
      await tools.callTool({ agentId: 'learner', tool: 'database', action: 'connect', key: 'learner/2' }),
    ).toMatchObject({ ok: true, state: 'CONNECTED' });
  });

  it('tool.call routes into escalations: escalate.escalate and request_state_machine_design.request start the workflow; a bad category is refused like the `escalate` command', async () => {
    await seedAgent('caller');
    const cmds = createCommandActivities({ db: handle.db });
    const apply = (tick: number, cmdId: string, type: string, args: Record<string, unknown>) =>
      cmds.applyCommands({
        agentId: 'caller',
        tick,
        workflowId: 'agent/caller',
        mode: 'main',
        commands: [{ cmdId, type, args }],
      });
    const [viaTool] = await apply(1, 'c1', 'tool.call', {
      tool: 'escalate',
      action: 'escalate',
      args: { task: 'my median is off', category: 'statistics', what_i_tried: 'sorted twice' },
    });
    expect(viaTool).toMatchObject({
      status: 'applied',
      message: 'escalated as caller.t1.c1; the answer comes as a note',
    });
    const esc = viaTool!.effects.find((e) => e.kind === 'escalate')!;
    expect(esc).toEqual({
      kind: 'escalate',
      escalationId: 'caller.t1.c1',
      input: {
        escalationId: 'caller.t1.c1',
        agentId: 'caller',
        tick: 1,
        task: 'my median is off',
        category: 'statistics',
        context: {},
        whatITried: 'sorted twice',
      },
    });
    const [design] = await apply(2, 'c2', 'tool.call', {
      tool: 'request_state_machine_design',
      action: 'request',
      args: { capability: 'a queue of jobs', context: 'I keep losing jobs' },
    });
    const designEsc = design!.effects.find((e) => e.kind === 'escalate')!;
    expect(designEsc).toMatchObject({
      escalationId: 'caller.t2.c2',
      input: {
        task: 'design a state-machine tool: a queue of jobs',
        category: 'state_machine_designer',
        context: { capability: 'a queue of jobs', why: 'I keep losing jobs' },
      },
    });
    const routes: string[] = [];
    script = ({ messages }) => (
      routes.push(Object.entries(subAgentBriefs).find(([, b]) => b === messages[0]!.content)?.[0] ?? '?'),
      answer({ solution: 'sorted is fine' })
    );
    for (const e of [esc, designEsc]) {
      const h = await suite.env.client.workflow.start<typeof escalationWorkflow>('escalationWorkflow', {
        taskQueue,
        workflowId: `escalation/${e.escalationId}`,
        args: [e.input as EscalationInput],
      });
      expect(await h.result()).toMatchObject({
        escalationId: e.escalationId,
        outcome: 'approved',
        decidedBy: 'oversight',
      });
    }
    expect(routes).toEqual(['statistics', 'state_machine_designer']);
    const [row1] = await handle.db.select().from(escalations).where(eq(escalations.id, 'caller.t1.c1'));
    expect(row1).toMatchObject({ category: 'statistics', whatITried: 'sorted twice', status: 'resolved' });

    // A bad category: refused with the same error as the `escalate` command, no escalation (never silently `general`).
    const [cmd] = await apply(3, 'c3', 'escalate', { task: 'help', category: 'astrology' });
    expect(cmd).toMatchObject({ status: 'rejected', effects: [] });
    const [tool] = await apply(3, 'c4', 'tool.call', {
      tool: 'escalate',
      action: 'escalate',
      args: { task: 'help', category: 'astrology' },
    });
    expect(tool!.effects).toEqual([]);
    expect(tool!.message).toBe(cmd!.message);
    expect(tool!.message).toContain('invalid args for escalate: args.category: Invalid option');
    // escalate.list through tool.call: the two escalations above, with their decisions.
    const [list] = await apply(4, 'c5', 'tool.call', { tool: 'escalate', action: 'list' });
    expect(list).toMatchObject({ status: 'applied', message: '2 recent escalations' });
  });

  it('escalating a category 5 times grants its tools ("you escalated statistics 5 times")', async () => {
    await seedAgent('stats');
    await handle.db
      .insert(toolRegistry)
      .values({ name: 'stats_ttest', kind: 'designed', status: 'active', capability: 'statistics.ttest', spec: {} });
    script = () => answer();
    const results = [];
    for (let i = 1; i <= 5; i++)
      results.push(
        await (
          await start({ agentId: 'stats', task: `stats ${i}`, category: 'statistics', escalationId: `stats-${i}` })
        ).result(),
      );
    expect(results.slice(0, 4).map((r) => r.grantedTools)).toEqual([[], [], [], []]);
    expect(results[4]!.grantedTools).toEqual(['stats_ttest']);
    const [note] = await handle.db.select().from(notes).where(eq(notes.id, results[4]!.noteId));
    expect(note!.text).toContain('you escalated statistics 5 times: granting stats_ttest');
  });

  it('a design round that fails, then passes in v2, joins the catalogue', async () => {
    await seedAgent('designer');
    const spec = {
      name: 'traffic_light',
      description: 'a traffic light',
      initial: 'RED',
      states: {
        RED: { description: 'stop', actions: { next: { to: 'GREEN', description: 'go' } } },
        GREEN: { description: 'go', actions: { next: { to: 'RED', description: 'stop' } } },
      },
    };
    const impl = (to: string) =>
      `export function run(state, action) { if (action !== 'next') throw new Error('invalid'); return state === 'RED' ? '${to}' : 'RED'; }\n`;
    const tests = `import { test } from 'node:test';\nimport assert from 'node:assert/strict';\nimport { run } from './tool.mjs';\ntest('red then green', () => { assert.equal(run('RED', 'next'), 'GREEN'); });\n`;
    const prompts: string[] = [];
    script = ({ messages }) => {
      const user = messages[1]!.content;
      prompts.push(user);
      const v2 = user.includes('failed its tests');
      return answer({
        solution: v2 ? 'v2' : 'v1',
        design: { spec, implementation: impl(v2 ? 'GREEN' : 'YELLOW'), tests },
      });
    };
    const before = sandboxRuns.length;
    const r = await (
      await start({
        agentId: 'designer',
        task: 'I need a traffic light tool',
        category: 'state_machine_designer',
        escalationId: 'design-1',
      })
    ).result();
    expect(r).toMatchObject({
      outcome: 'approved',
      designRounds: 2,
      designedTool: { name: 'traffic_light', rounds: 2 },
    });
    expect(sandboxRuns.length - before).toBe(2);
    expect(prompts[1]).toContain('not ok 1 - red then green');
    const [tool] = await handle.db.select().from(toolRegistry).where(eq(toolRegistry.name, 'traffic_light'));
    expect(tool).toMatchObject({
      kind: 'designed',
      status: 'active',
      implementation: impl('GREEN'),
      createdBy: 'oversight',
    });
    expect(tool!.spec).toMatchObject({ initial: 'RED', design: { rounds: 2, firstTry: false } });
    const rounds = await handle.db
      .select()
      .from(partnershipMessages)
      .where(eq(partnershipMessages.escalationId, 'design-1'))
      .orderBy(asc(partnershipMessages.id));
    expect(rounds.filter((m) => m.kind.startsWith('design_')).map((m) => m.kind)).toEqual([
      'design_failed',
      'design_passed',
    ]);
    // The agent can use it at once (discovered via design).
    expect(
      await createToolActivities({ db: handle.db }).callTool({
        agentId: 'designer',
        tool: 'traffic_light',
        action: 'next',
        key: 'designer/1',
      }),
    ).toMatchObject({ ok: true, state: 'GREEN' });
  }, 60_000);

  it('design rounds are bounded: a design that never passes stops after maxDesignRounds, is denied and never registered', async () => {
    await seedAgent('stubborn');
    const spec = {
      name: 'never_green',
      description: 'a light that is never right',
      initial: 'RED',
      states: {
        RED: { description: 'stop', actions: { next: { to: 'GREEN', description: 'go' } } },
        GREEN: { description: 'go', actions: { next: { to: 'RED', description: 'stop' } } },
      },
    };
    const impl = `export function run() { return 'BLUE'; }\n`;
    const tests = `import { test } from 'node:test';\nimport assert from 'node:assert/strict';\nimport { run } from './tool.mjs';\ntest('red then green', () => { assert.equal(run('RED', 'next'), 'GREEN'); });\n`;
    const rounds: number[] = [];
    script = ({ messages }) => {
      const user = messages[1]!.content;
      rounds.push(user.includes('failed its tests') ? Number(/Design round (\d+)/.exec(user)?.[1]) : 1);
      return answer({ solution: `try ${rounds.length}`, design: { spec, implementation: impl, tests } });
    };
    const before = sandboxRuns.length;
    const r = await (
      await start({
        agentId: 'stubborn',
        task: 'I need a light',
        category: 'state_machine_designer',
        maxDesignRounds: 2,
        escalationId: 'stubborn-1',
      })
    ).result();
    expect(r).toMatchObject({ outcome: 'denied', decidedBy: 'oversight', designRounds: 2, grantedTools: [] });
    expect(r.designedTool).toBeUndefined();
    expect(rounds).toEqual([1, 2]); // round 2 got round 1's feedback; no round 3
    expect(sandboxRuns.length - before).toBe(2);
    expect(await handle.db.select().from(toolRegistry).where(eq(toolRegistry.name, 'never_green'))).toEqual([]);
    const msgs = await handle.db
      .select()
      .from(partnershipMessages)
      .where(eq(partnershipMessages.escalationId, 'stubborn-1'));
    expect(msgs.filter((m) => m.kind.startsWith('design_')).map((m) => m.kind)).toEqual([
      'design_failed',
      'design_failed',
    ]);
    expect(await row('stubborn-1')).toMatchObject({ oversightAnswer: 'reject', outcome: 'blocked' });
    expect(
      await handle.db
        .select()
        .from(discoveredTools)
        .where(and(eq(discoveredTools.agentId, 'stubborn'), eq(discoveredTools.via, 'design'))),
    ).toEqual([]);
  }, 60_000);

  it('bad input fails at once, non-retryable, naming the fields; bad updates are rejected by the validators', async () => {
    const bad = start({ agentId: 'router', task: '', category: 'astrology' as never, escalationId: 'bad-1' });
    const err = await (await bad).result().catch((e: unknown) => e);
    expect(err).toBeInstanceOf(WorkflowFailedError);
    const msg = String((err as WorkflowFailedError).cause?.message);
    expect(msg).toContain('escalationWorkflow: invalid input');
    expect(msg).toContain('task:');
    expect(msg).toContain('category:');
    await seedAgent('valid');
    script = () => answer();
    const h = await start({ agentId: 'valid', task: 'x', humanRequired: true, escalationId: 'valid-1' });
    await expect(h.executeUpdate(nudgeUpdate, { args: [{ by: 'dafit', text: '  ' }] })).rejects.toThrow(
      WorkflowUpdateFailedError,
    );
    await expect(h.executeUpdate(rejectUpdate, { args: [{ by: 'dafit' } as never] })).rejects.toThrow(
      WorkflowUpdateFailedError,
    );
    await h.executeUpdate(vetoUpdate, { args: [{ reason: 'cleanup' }] });
    expect(await h.result()).toMatchObject({ outcome: 'denied', decidedBy: 'human' });

    // Started the way the Temporal UI / CLI does it: a workflow type and JSON input, nothing else.
    const temporal = toolPath('temporal');
    const ui = (id: string, json: string) =>
      run(temporal, [
        'workflow',
        'start',
        '--address',
        suite.env.address,
        '--task-queue',
        taskQueue,
        '--type',
        'escalationWorkflow',
        '--workflow-id',
        `escalation/${id}`,
        '--input',
        json,
      ]);
    const started = await ui(
      'ui-1',
      JSON.stringify({ escalationId: 'ui-1', agentId: 'valid', task: 'started from the UI', category: 'code' }),
    );
    expect(started.code, started.stderr).toBe(0);
    expect(await suite.env.client.workflow.getHandle('escalation/ui-1').result()).toMatchObject({
      escalationId: 'ui-1',
      outcome: 'approved',
      decidedBy: 'oversight',
    });
    const badJson = await ui(
      'ui-2',
      JSON.stringify({ escalationId: 'ui-2', agentId: 'valid', task: 'x', deadlineMs: 5, extra: 1 }),
    );
    expect(badJson.code, badJson.stderr).toBe(0);
    const uiErr = await suite.env.client.workflow
      .getHandle('escalation/ui-2')
      .result()
      .catch((e: unknown) => e);
    expect(uiErr).toBeInstanceOf(WorkflowFailedError);
    const cause = (uiErr as WorkflowFailedError).cause as { message: string; nonRetryable?: boolean };
    expect(cause.message).toContain('deadlineMs:');
    expect(cause.message).toContain('extra');
    expect(cause.nonRetryable).toBe(true);
  }, 60_000);

  it('a human answer sent before the escalation is written waits for it, and is recorded', async () => {
    await seedAgent('early');
    script = () => answer();
    let release!: () => void;
    holdOpen = new Promise((r) => (release = r));
    try {
      const h = await start({
        agentId: 'early',
        task: 'answered at once',
        humanRequired: true,
        escalationId: 'early-1',
      });
      const veto = h.executeUpdate(vetoUpdate, { args: [{ reason: 'no' }] });
      // The answer is in the workflow before the escalation's row exists.
      await new Promise((r) => setTimeout(r, 500));
      expect(await handle.db.select().from(escalations).where(eq(escalations.id, 'early-1'))).toHaveLength(0);
      release();
      await expect(veto).resolves.toMatchObject({ human: { verdict: 'veto' } });
      expect(await h.result()).toMatchObject({ outcome: 'denied', decidedBy: 'human' });
    } finally {
      release();
      holdOpen = Promise.resolve();
    }
  }, 60_000);

  it('malformed oversight answers: the human decides (no silent approval)', async () => {
    await seedAgent('garbled');
    script = () => 'Sure! I think you should approve this.';
    const h = await start({ agentId: 'garbled', task: 'x', deadlineMs: 10_000, graceMs: 0, escalationId: 'garbled-1' });
    const r = await h.result();
    expect(r).toMatchObject({ outcome: 'denied', decidedBy: 'default' });
    const [esc] = await handle.db.select().from(escalations).where(eq(escalations.id, 'garbled-1'));
    expect(esc!.status).toBe('timed_out');
    // The human became required when the oversight failed: the row has its deadline (not null).
    expect(esc!.deadlineAt?.getTime()).toBe((await h.describe()).startTime.getTime() + 10_000);
    const [n] = await handle.db.select().from(notes).where(eq(notes.id, r.noteId));
    expect(n!.text).toContain('no well-formed answer after 2 attempts');
  });

  it('metrics: catalogue growth, escalation rate per task, discovery rate, first-try validation of designed tools', async () => {
    const db = handle.db;
    const m = await escalationMetrics(db, 'designer');
    expect(m.designedTools).toEqual({ total: 1, firstTry: 0, firstTryRate: 0 });
    expect(m.discovery.byVia).toEqual({ design: 1, teaching: 3 });
    expect(m.catalogue.byKind).toMatchObject({ builtin: 4, designed: 3 });
    expect(m.catalogue.growth.at(-1)!.total).toBe(m.catalogue.total);
    const s = await escalationMetrics(db, 'stats');
    expect(s.escalations).toMatchObject({ total: 5, tasks: 0, ratePerTask: null });
    expect(s.discovery).toMatchObject({ byVia: { escalation: 1, teaching: 3 }, perEscalation: 0.2 });
  });

  it('CLI: metrics, escalations list/show from Postgres, approve through the Temporal update; bad flags are clear errors', async () => {
    const vars = { DATABASE_URL: dbUrl, TEMPORAL_ADDRESS: suite.env.address };
    const metrics = await run(tsxBin, ['cli/main.ts', 'metrics', 'designer', '--json'], vars);
    expect(metrics.code, metrics.stderr).toBe(0);
    expect(JSON.parse(metrics.stdout).designedTools).toEqual({ total: 1, firstTry: 0, firstTryRate: 0 });
    const text = await run(tsxBin, ['cli/main.ts', 'metrics', 'stats'], vars);
    expect(text.code, text.stderr).toBe(0);
    expect(text.stdout).toContain('escalations      5 for 0 tasks');
    expect(text.stdout).toMatch(/discovered tools 4 \(escalation 1, teaching 3\); 0\.2 per escalation/);
    const badAgent = await run(tsxBin, ['cli/main.ts', 'metrics', 'no such agent!'], vars);
    expect(badAgent.code).toBe(2);
    expect(badAgent.stderr).toContain('bad agent id "no such agent!"');
    const ghost = await run(tsxBin, ['cli/main.ts', 'metrics', 'ghost'], vars);
    expect(ghost.code).toBe(1);
    expect(ghost.stderr).toContain("mindloop: no agent 'ghost'");
    const noArg = await run(tsxBin, ['cli/main.ts', 'metrics'], vars);
    expect(noArg.code).toBe(2);
    expect(noArg.stderr).toContain("missing required argument 'agent'");
    const list = await run(tsxBin, ['cli/main.ts', 'escalations', 'list', '--agent', 'stats'], vars);
    expect(list.stdout.trim().split('\n')).toHaveLength(5);
    expect(list.stdout).toContain('stats-5  stats  statistics  resolved (oversight)');
    const show = await run(tsxBin, ['cli/main.ts', 'escalations', 'show', 'danger-1'], vars);
    expect(show.stdout).toContain(
      'decision    oversight approve, human approve, outcome executed, danger privileged_container',
    );
    const [garbled] = await handle.db.select().from(escalations).where(eq(escalations.id, 'garbled-1'));
    const showGarbled = await run(tsxBin, ['cli/main.ts', 'escalations', 'show', 'garbled-1'], vars);
    expect(showGarbled.code, showGarbled.stderr).toBe(0);
    expect(showGarbled.stdout).toContain(`deadline    ${garbled!.deadlineAt!.toISOString()}`);
    const badStatus = await run(tsxBin, ['cli/main.ts', 'escalations', 'list', '--status', 'maybe'], vars);
    expect(badStatus.code).toBe(2);
    expect(badStatus.stderr).toContain('status must be one of open, in_progress');

    await seedAgent('clihuman');
    script = () => answer({ verdict: 'reject' });
    const h = await start({ agentId: 'clihuman', task: 'needs a person', humanRequired: true, escalationId: 'cli-1' });
    await untilQuery(
      h,
      escalationStatusQuery,
      (s) => s.phase === 'awaiting_human',
      'the escalation to wait for a human',
    );
    const ok = await run(
      tsxBin,
      ['cli/main.ts', 'escalations', 'approve', 'cli-1', '--by', 'dafit', '--comment', 'go'],
      vars,
    );
    expect(ok.code, ok.stderr).toBe(0);
    expect(ok.stdout).toContain('approve: escalation cli-1');
    expect(await h.result()).toMatchObject({ outcome: 'approved', decidedBy: 'human' });
    const late = await run(tsxBin, ['cli/main.ts', 'escalations', 'veto', 'cli-1', '--reason', 'too late'], vars);
    expect(late.code).toBe(1);
    expect(late.stderr).toMatch(/no running escalation cli-1|refused the veto/);

    // reject (a reason is required) and nudge (the text is the rest of the line).
    const h2 = await start({ agentId: 'clihuman', task: 'second', humanRequired: true, escalationId: 'cli-2' });
    const h3 = await start({ agentId: 'clihuman', task: 'third', humanRequired: true, escalationId: 'cli-3' });
    await untilQuery(
      h3,
      escalationStatusQuery,
      (s) => s.phase === 'awaiting_human',
      'the escalation to wait for a human',
    );
    const noReason = await run(tsxBin, ['cli/main.ts', 'escalations', 'reject', 'cli-2'], vars);
    expect(noReason.code).toBe(2);
    expect(noReason.stderr).toContain("required option '--reason <text>' not specified");
    const rej = await run(
      tsxBin,
      ['cli/main.ts', 'escalations', 'reject', 'cli-2', '--reason', 'not now', '--json'],
      vars,
    );
    expect(rej.code, rej.stderr).toBe(0);
    expect(JSON.parse(rej.stdout)).toMatchObject({ escalationId: 'cli-2', human: { verdict: 'reject', by: 'human' } });
    // The nudge goes before any wait on a result: waiting lets the test server skip time, which
    // would run out cli-3's wait for a human.
    const nudge = await run(
      tsxBin,
      ['cli/main.ts', 'escalations', 'nudge', 'cli-3', 'use', 'the', 'median', '--by', 'dafit'],
      vars,
    );
    expect(nudge.code, nudge.stderr).toBe(0);
    expect(nudge.stdout).toContain('nudge: escalation cli-3');
    expect(await h2.result()).toMatchObject({ outcome: 'denied', decidedBy: 'human' });
    expect(await h3.result()).toMatchObject({ outcome: 'nudged', decidedBy: 'human' });
    expect(await row('cli-3')).toMatchObject({ humanAnswer: 'nudge', humanComment: 'use the median' });
  }, 300_000); // ~12 CLI processes (tsx start-up each), on a loaded 2-CPU machine
});
