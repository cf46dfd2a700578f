/**
 * Escalations and state-machine tools inside the agent loop (time-skipping Temporal, real activities on Postgres, scripted
 * agent and oversight models): `tool.call` of an undiscovered tool is refused and logged; the
 * `escalate` command starts escalation/<id> as a child whose answer comes back as a note the
 * next tick sees, granting the database tool; a danger-zone command (`shell` with SSH host
 * checks off) is held — not run — and its escalation waits for a human, who rejects it.
 */
import { and, asc, eq } from 'drizzle-orm';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createActivities } from '../../activities/index.js';
import type { ChatMessage } from '../../activities/llm/index.js';
import { createToolActivities } from '../../activities/tools.js';
import { subAgentBriefs } from '../../core/escalation.js';
import { renderCommandBlock } from '../../core/reply-parser.js';
import {
  agentConfig,
  agents,
  commandLog,
  decisionLog,
  discoveredTools,
  escalations,
  llmRegistry,
  notes,
  processLog,
  toolRegistry,
  toolTransitions,
} from '../../db/schema/index.js';
import type { agentLoopWorkflow } from '../../workflows/agent-loop/index.js';
import { escalationStatusQuery, rejectUpdate } from '../../workflows/escalation.js';
import { migratedDatabase, repoToolsDir, type MigratedDatabase } from '../helpers/env.js';
import { withWorker } from '../helpers/harness.js';
import { timeSkippingSuite } from '../helpers/temporal.js';

const suite = timeSkippingSuite();
let handle: MigratedDatabase;
const agentPrompts: ChatMessage[][] = [];
/** Set while the keeper test runs (its emotion/tag calls carry no agent id). */
let keeperTurn = false;

const keeperContexts: string[] = [];
/** The `keeper` agent: connects the database tool, then queries it after a continue-as-new. */
function keeperReply(messages: ChatMessage[]): string {
  if (messages[0]!.role !== 'system') return 'calm';
  keeperContexts.push(messages[0]!.content);
  const tick = keeperContexts.length;
  if (tick === 1)
    return `Connecting.\n${renderCommandBlock([{ cmdId: 'k1', type: 'tool.call', args: { tool: 'database', action: 'connect' } }])}`;
  if (tick === 2)
    return `Querying.\n${renderCommandBlock([{ cmdId: 'k2', type: 'tool.call', args: { tool: 'database', action: 'query', args: { table: 'notes', limit: 5 } } }])}`;
  return 'Done.';
}

function reply(messages: ChatMessage[]): string {
  if (messages[0]!.content.includes('(agent id keeper)') || (messages[0]!.role !== 'system' && keeperTurn))
    return keeperReply(messages);
  if (Object.values(subAgentBriefs).includes(messages[0]!.content)) {
    return JSON.stringify({
      verdict: 'approve',
      solution: 'use the median',
      teaching_moment: 'outliers pull the mean',
      recommended_tools: ['database'],
      needs_human: false,
    });
  }
  agentPrompts.push(messages);
  const tick = agentPrompts.length;
  if (tick === 1) {
    return `I need help and a tool.\n${renderCommandBlock([
      { cmdId: 'q1', type: 'tool.call', args: { tool: 'database', action: 'connect' } },
      {
        cmdId: 'e1',
        type: 'escalate',
        args: { task: 'my averages look wrong', category: 'statistics', what_i_tried: 'recomputed twice' },
      },
      { cmdId: 's1', type: 'shell', args: { command: 'ssh -o StrictHostKeyChecking=no root@10.0.0.9 uptime' } },
    ])}`;
  }
  return `Tick ${tick}: reading my notes.`;
}

beforeAll(async () => {
  handle = await migratedDatabase('mindloop_esc_loop', 10);
}, 60_000);
afterAll(async () => {
  await handle?.dispose();
});

describe('escalations from the agent loop', () => {
  it('tool.call refused when undiscovered; escalate answered as a note; a dangerous command held for a human', async () => {
    const db = handle.db;
    await db.insert(agents).values({ id: 'esca', name: 'esca' });
    // No validator: the held shell command must reach the danger-zone check, not wait as unvalidated.
    await db.insert(agentConfig).values({ agentId: 'esca', key: 'auto_pass_destructive', value: true });
    await db.insert(llmRegistry).values([
      { agentId: 'esca', name: 'agent', provider: 'scripted', model: 'scripted-agent', role: 'agent', priority: 1 },
      {
        agentId: 'esca',
        name: 'overseer',
        provider: 'scripted',
        model: 'scripted-oversight',
        role: 'oversight',
        priority: 1,
      },
    ]);
    const tools = createToolActivities({ db });
    await tools.ensureBuiltinTools();
    await tools.grantStarterTools({ agentId: 'esca' });
    const spec = {
      taskQueue: 'mindloop',
      workflowBundle: suite.bundle,
      activities: createActivities({
        db,
        llm: { env: {}, toolsDir: repoToolsDir, scriptedReply: ({ messages }) => reply(messages) },
      }),
    };
    let humanAnswered = false;
    await withWorker(suite.env, spec, async () => {
      const h = await suite.env.client.workflow.start<typeof agentLoopWorkflow>('agentLoopWorkflow', {
        taskQueue: 'mindloop',
        workflowId: 'agent/esca',
        args: [{ agentId: 'esca', maxTicks: 3, settings: { delayMs: 5_000 } }],
      });
      await h.result();
      // The held shell command's escalation waits for a human; they reject it.
      const [held] = await db
        .select()
        .from(escalations)
        .where(and(eq(escalations.agentId, 'esca'), eq(escalations.category, 'general')));
      expect(held).toBeDefined();
      const eh = suite.env.client.workflow.getHandle(`escalation/${held!.id}`);
      // Time skips while the loop runs, possibly past the 24 h deadline: still WAIT (grace),
      // undecided. The test server keeps skipping until the client locks it again after the
      // loop's result, so on a busy machine the grace may be over too: then it was denied by
      // default, never approved (the human branches are covered one by one in escalation.test.ts).
      const s = await eh.query(escalationStatusQuery);
      if (s.phase === 'awaiting_human' || s.phase === 'waiting') {
        humanAnswered = true;
        expect(s.decision).toBeNull();
        await eh.executeUpdate(rejectUpdate, { args: [{ by: 'dafit', reason: 'no root ssh' }] });
        expect(await eh.result()).toMatchObject({ outcome: 'denied', decidedBy: 'human', proposalOutcome: 'blocked' });
      } else {
        expect(await eh.result()).toMatchObject({
          outcome: 'denied',
          decidedBy: 'default',
          proposalOutcome: 'blocked',
        });
      }
    });

    const log = await db.select().from(commandLog).where(eq(commandLog.agentId, 'esca'));
    const byId = (id: string) => log.find((c) => c.cmdId === id)!;
    expect(byId('q1')).toMatchObject({ status: 'applied' });
    expect(String((byId('q1').result as { text?: string }).text)).toContain(
      "tool 'database' is not among your discovered tools",
    );
    expect(byId('s1')).toMatchObject({ status: 'rejected' });
    expect(byId('s1').reason).toMatch(/^held for human approval \(ssh_without_auth\): escalation esca\.t1\.s1/);
    // Not run: no shell process was ever started.
    expect(await db.select().from(processLog).where(eq(processLog.agentId, 'esca'))).toEqual([]);
    expect(
      await db
        .select()
        .from(toolTransitions)
        .where(and(eq(toolTransitions.agentId, 'esca'), eq(toolTransitions.result, 'undiscovered'))),
    ).toHaveLength(1);

    const [answered] = await db.select().from(escalations).where(eq(escalations.id, 'esca.t1.e1'));
    expect(answered).toMatchObject({
      status: 'resolved',
      decidedBy: 'oversight',
      category: 'statistics',
      grantedTools: ['database'],
    });
    expect(
      await db
        .select()
        .from(discoveredTools)
        .where(and(eq(discoveredTools.agentId, 'esca'), eq(discoveredTools.via, 'escalation'))),
    ).toHaveLength(1);
    const [d] = await db.select().from(decisionLog).where(eq(decisionLog.escalationId, 'esca.t1.s1'));
    expect(d).toMatchObject({
      dangerFlags: ['ssh_without_auth'],
      humanAnswer: humanAnswered ? 'reject' : 'none',
      outcome: 'blocked',
    });
    // The answer came back as a note, seen in a later tick's context.
    const [note] = await db
      .select()
      .from(notes)
      .where(and(eq(notes.agentId, 'esca'), eq(notes.idempotencyKey, 'esca.t1.e1:note')));
    expect(note!.text).toContain('Teaching moment: outliers pull the mean');
    expect(agentPrompts.slice(1).some((p) => p.some((m) => m.content.includes('outliers pull the mean')))).toBe(true);

    // Context 2 shows only the discovered tools, each as its LangChain definition: current state and valid actions.
    // (agentPrompts also holds the emotion/tag calls, which have no system message.)
    const contexts = agentPrompts.filter((p) => p[0]!.role === 'system').map((p) => p[0]!.content);
    expect(contexts.length).toBeGreaterThanOrEqual(2);
    expect(contexts[0]).toContain(
      '- escalate: Escalate a task you cannot solve to the oversight tier.\nCurrent state: READY',
    );
    expect(contexts[0]).toContain('- request_state_machine_design: ');
    expect(contexts[0]).not.toContain('- database: ');
    const granted = contexts.slice(1).find((c) => c.includes('- database: '));
    expect(granted).toContain(
      'Current state: IDLE — not connected\nValid actions now:\n- connect() → CONNECTED: open a read-only session',
    );
  }, 120_000);

  it('tool state belongs to the agent: a CONNECTED database tool is still CONNECTED after continue-as-new', async () => {
    const db = handle.db;
    keeperTurn = true;
    await db.insert(agents).values({ id: 'keeper', name: 'keeper' });
    await db.insert(llmRegistry).values({
      agentId: 'keeper',
      name: 'agent',
      provider: 'scripted',
      model: 'scripted-agent',
      role: 'agent',
      priority: 1,
    });
    const tools = createToolActivities({ db });
    await tools.ensureBuiltinTools();
    await tools.grantStarterTools({ agentId: 'keeper', tools: ['database'] });
    const spec = {
      taskQueue: 'mindloop-keeper',
      workflowBundle: suite.bundle,
      activities: createActivities({
        db,
        llm: { env: {}, toolsDir: repoToolsDir, scriptedReply: ({ messages }) => reply(messages) },
      }),
    };
    let firstRunId = '';
    await withWorker(suite.env, spec, async () => {
      // One tick per run: every tick after the first starts in a new run (continue-as-new).
      const h = await suite.env.client.workflow.start<typeof agentLoopWorkflow>('agentLoopWorkflow', {
        taskQueue: 'mindloop-keeper',
        workflowId: 'agent/keeper',
        args: [{ agentId: 'keeper', maxTicks: 3, ticksPerRun: 1, settings: { delayMs: 1_000 } }],
      });
      firstRunId = h.firstExecutionRunId;
      await h.result();
      expect((await suite.env.client.workflow.getHandle('agent/keeper', firstRunId).describe()).status.name).toBe(
        'CONTINUED_AS_NEW',
      );
    });
    keeperTurn = false;
    const moves = await db
      .select()
      .from(toolTransitions)
      .where(eq(toolTransitions.agentId, 'keeper'))
      .orderBy(asc(toolTransitions.id));
    expect(moves.map((m) => [m.action, m.fromState, m.toState, m.result])).toEqual([
      ['connect', 'IDLE', 'CONNECTED', 'ok'],
      ['query', 'CONNECTED', 'QUERY_READY', 'ok'],
    ]);
    expect(keeperContexts[1]).toContain('- database: ');
    expect(keeperContexts[1]).toContain('Current state: CONNECTED');
    expect(keeperContexts[2]).toContain('Current state: QUERY_READY');
  }, 120_000);

  it('a new agent starts with the built-in catalogue and the starter tools (via teaching), and sees them', async () => {
    const db = handle.db;
    await db.insert(agents).values({ id: 'newbie', name: 'newbie' });
    await db.insert(llmRegistry).values({
      agentId: 'newbie',
      name: 'agent',
      provider: 'scripted',
      model: 'scripted-agent',
      role: 'agent',
      priority: 1,
    });
    const seen: string[] = [];
    const spec = {
      taskQueue: 'mindloop-newbie',
      workflowBundle: suite.bundle,
      activities: createActivities({
        db,
        llm: {
          env: {},
          toolsDir: repoToolsDir,
          scriptedReply: ({ messages }) => (
            messages[0]!.role === 'system' && seen.push(messages[0]!.content),
            'Hello.'
          ),
        },
      }),
    };
    await withWorker(suite.env, spec, () =>
      suite.env.client.workflow.execute<typeof agentLoopWorkflow>('agentLoopWorkflow', {
        taskQueue: 'mindloop-newbie',
        workflowId: 'agent/newbie',
        args: [{ agentId: 'newbie', maxTicks: 1 }],
      }),
    );
    const mine = await db
      .select({ name: toolRegistry.name, via: discoveredTools.via })
      .from(discoveredTools)
      .innerJoin(toolRegistry, eq(toolRegistry.id, discoveredTools.toolId))
      .where(eq(discoveredTools.agentId, 'newbie'))
      .orderBy(asc(toolRegistry.name));
    expect(mine).toEqual([
      { name: 'discover_tools', via: 'teaching' },
      { name: 'escalate', via: 'teaching' },
      { name: 'request_state_machine_design', via: 'teaching' },
    ]);
    expect(
      (await db.select().from(toolRegistry).where(eq(toolRegistry.kind, 'builtin'))).map((t) => t.name).sort(),
    ).toEqual(['database', 'discover_tools', 'escalate', 'request_state_machine_design']);
    expect(seen[0]).toContain('Tools you have discovered');
    expect(seen[0]).toContain('- discover_tools: ');
    expect(seen[0]).not.toContain('- database: ');
  }, 120_000);
});
