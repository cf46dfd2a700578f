/**
 * Two agents on real Temporal + Postgres + NATS, each on the scripted model: Ana makes Ben a
 * peer and writes to him; Ben, idle until a note comes (no timeout), is woken by her message,
 * reads it in his next context, answers and rates her, and his trust in her follows the rating.
 * Ana's identity and active thinking method reach her context 0; her `llm_task.ask` is answered
 * by her task model as a note before her next tick; a strategy she applies herself is measured
 * two ticks later like an automatic one. The messages are on the bus as AgentMessage events.
 */
import { Client, Connection } from '@temporalio/client';
import type { WorkflowBundleWithSourceMap } from '@temporalio/worker';
import { and, eq } from 'drizzle-orm';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createActivities } from '../../activities/index.js';
import type { ChatMessage, ScriptedReplyFn } from '../../activities/llm/index.js';
import { defaultPrices } from '../../core/lifeforce.js';
import { renderCommandBlock } from '../../core/reply-parser.js';
import { trustFromRatings } from '../../core/society/trust.js';
import {
  agentPeers,
  agents,
  antiStagnationMetrics,
  llmCalls,
  llmRegistry,
  notes,
  peerRatings,
} from '../../db/schema/index.js';
import type { Bus, BusMessage } from '../../runtime/bus.js';
import { agentEventSink } from '../../runtime/bus-agents.js';
import { startStack, type Stack } from '../../runtime/stack.js';
import { bundleWorkflows } from '../../workers/queues.js';
import type { AgentLoopResult } from '../../workflows/agent-loop/index.js';
import { freePort, freshPostgresDatabase, tempDir, testEnv } from '../helpers/env.js';
import { startLoop, untilStatus, withWorker } from '../helpers/harness.js';
import { cleanupBus, testBus, testRoot, until } from '../helpers/nats.js';
import { neutralReflexReplies } from '../helpers/scripted.js';

const data = tempDir('peers');
let stack: Stack;
let client: Client;
let bundle: WorkflowBundleWithSourceMap;
let bus: Bus;
let dropDb: () => Promise<void>;
/** Each agent's think prompts, in order. */
const prompts: Record<'ana' | 'ben', ChatMessage[][]> = { ana: [], ben: [] };

const userOf = (messages: ChatMessage[]) => messages.find((m) => m.role === 'user')?.content ?? '';
const systemOf = (messages: ChatMessage[]) => messages.find((m) => m.role === 'system')?.content ?? '';

function ana(i: number): string {
  if (i === 0) {
    return `I will find a peer and learn who I am.\n${renderCommandBlock([
      { cmdId: 'p1', type: 'agents.add', args: { peer: 'ben' } },
      { cmdId: 'm1', type: 'messages.send', args: { to: 'ben', text: 'Hello Ben, Ana here: what do you see?' } },
      {
        cmdId: 'i1',
        type: 'identity.set',
        args: { description: 'An explorer of questions.', values: ['curiosity', 'candour'] },
      },
      {
        cmdId: 't1',
        type: 'thinking_methods.add',
        args: { name: 'socratic', prompt: 'Answer every claim with a question.' },
      },
      { cmdId: 't2', type: 'thinking_methods.use', args: { name: 'socratic' } },
    ])}`;
  }
  if (i === 1)
    return `I ask a helper.\n${renderCommandBlock([{ cmdId: 'a1', type: 'llm_task.ask', args: { question: 'How many moons does Saturn have?' } }])}`;
  if (i === 2)
    return `I shake up my thinking.\n${renderCommandBlock([{ cmdId: 's1', type: 'stagnation_strategies.use', args: { name: 'meta_analysis' } }])}`;
  return `Ana, tick ${i + 1}: a new thought about tick ${i + 1}.`;
}

function ben(i: number, user: string): string {
  if (i > 0 && user.includes('Hello Ben')) {
    return `Ana wrote to me; I answer and rate her.\n${renderCommandBlock([
      { cmdId: 'm1', type: 'messages.send', args: { to: 'ana', text: 'Hi Ana, I see you.' } },
      { cmdId: 'r1', type: 'reputation.rate', args: { peer: 'ana', score: 2, reason: 'a friendly first contact' } },
    ])}`;
  }
  return `Ben, tick ${i + 1}: waiting quietly.`;
}

const reply: ScriptedReplyFn = ({ messages, purpose }) => {
  if (purpose === 'llm_task') return 'Saturn has 146 known moons.';
  if (purpose !== undefined && purpose !== 'think') {
    const r = neutralReflexReplies[purpose];
    if (r === undefined) throw new Error(`no scripted reply for purpose ${purpose}`);
    return r;
  }
  const who = systemOf(messages).includes('(agent id ana)') ? 'ana' : 'ben';
  const i = prompts[who].length;
  prompts[who].push(messages);
  return who === 'ana' ? ana(i) : ben(i, userOf(messages));
};

beforeAll(async () => {
  const fresh = await freshPostgresDatabase('mindloop_peers');
  dropDb = fresh.drop;
  stack = await startStack({
    env: testEnv({ MINDLOOP_DATA_DIR: data.path, TEMPORAL_PORT: await freePort(), DATABASE_URL: fresh.url }),
    ui: false,
  });
  const db = stack.db.db;
  await db.insert(agents).values([
    { id: 'ana', name: 'Ana' },
    { id: 'ben', name: 'Ben' },
  ]);
  await db.insert(llmRegistry).values([
    { agentId: 'ana', name: 'ana-mind', provider: 'scripted', model: 'scripted-ana', role: 'agent', priority: 1 },
    { agentId: 'ana', name: 'ana-helper', provider: 'scripted', model: 'scripted-helper', role: 'task', priority: 1 },
    { agentId: 'ben', name: 'ben-mind', provider: 'scripted', model: 'scripted-ben', role: 'agent', priority: 1 },
  ]);
  bus = await testBus(testRoot('peers_loop'));
  bundle = await bundleWorkflows();
  client = new Client({ connection: await Connection.connect(stack.temporal.connection) });
}, 120_000);
afterAll(async () => {
  await client?.connection.close();
  await cleanupBus(bus);
  await stack?.stop();
  await dropDb?.();
  data.remove();
});

/** The workflow's result, or a failure naming what it waited for. */
async function within<T>(what: string, p: Promise<T>, ms: number): Promise<T> {
  let timer: NodeJS.Timeout | undefined;
  const late = new Promise<never>(
    (_, reject) => (timer = setTimeout(() => reject(new Error(`timed out waiting for ${what}`)), ms)),
  );
  try {
    return await Promise.race([p, late]);
  } finally {
    clearTimeout(timer);
  }
}

describe('two agents on the scripted model', () => {
  it('Ana writes to an idle Ben, who wakes, reads it, answers and rates her; her identity, method, question and strategy take effect', async () => {
    const messages: BusMessage[] = [];
    const sub = bus.subscribe(bus.subjects.agentEvents(), (m) => void messages.push(m));
    await bus.flush();
    const spec = {
      taskQueue: 'peers-it',
      workflowBundle: bundle,
      activities: createActivities({
        db: stack.db.db,
        llm: { env: {}, toolsDir: '', scriptedReply: reply, lifeforce: { enabled: false, prices: defaultPrices } },
        events: agentEventSink(bus),
      }),
    };
    await withWorker(stack.temporal.connection, spec, async (taskQueue) => {
      // Ben idles until a note comes: no timeout, so only a wake can start his second tick.
      const benH = await startLoop(client, taskQueue, {
        agentId: 'ben',
        maxTicks: 2,
        settings: { idle: { on: true, wakeOn: ['note'], timeoutMs: 60_000 } },
      });
      await untilStatus(benH, (s) => s.tick === 1 && s.phase === 'idle', 'ben idle after his first tick', 30_000);
      const anaH = await startLoop(client, taskQueue, { agentId: 'ana', maxTicks: 5, settings: { delayMs: 50 } });
      expect(await within('ben to be woken and finish', benH.result(), 60_000)).toEqual<AgentLoopResult>({
        agentId: 'ben',
        ticks: 2,
        reason: 'max_ticks',
      });
      expect(await within('ana to finish', anaH.result(), 60_000)).toEqual<AgentLoopResult>({
        agentId: 'ana',
        ticks: 5,
        reason: 'max_ticks',
      });
    });
    const db = stack.db.db;

    // Ben: his first context had no message; the second (after the wake) carries Ana's.
    expect(prompts.ben).toHaveLength(2);
    expect(userOf(prompts.ben[0]!)).not.toContain('Hello Ben');
    expect(userOf(prompts.ben[1]!)).toMatch(
      /note #\d+ from peer ana \(priority 1\): Hello Ben, Ana here: what do you see\?/,
    );
    const benIn = await db
      .select()
      .from(notes)
      .where(and(eq(notes.agentId, 'ben'), eq(notes.direction, 'in')));
    expect(benIn.map((n) => [n.source, n.sender, n.tickSeen])).toEqual([['peer', 'ana', 2]]);
    // Ben's answer is stored on Ana, and his trust in her follows his rating.
    const anaIn = await db
      .select()
      .from(notes)
      .where(and(eq(notes.agentId, 'ana'), eq(notes.source, 'peer')));
    expect(anaIn.map((n) => [n.sender, n.text])).toEqual([['ben', 'Hi Ana, I see you.']]);
    const [benSide] = await db
      .select()
      .from(agentPeers)
      .where(and(eq(agentPeers.agentId, 'ben'), eq(agentPeers.peerAgentId, 'ana')));
    expect(benSide!.trust).toBeCloseTo(trustFromRatings([2]), 3);
    expect(benSide!.trust).toBeGreaterThan(0.5);
    expect((await db.select().from(peerRatings)).map((r) => [r.agentId, r.peerAgentId, r.score, r.tick])).toEqual([
      ['ben', 'ana', 2, 2],
    ]);

    // Ana's tick 2: her identity and the thinking method she made active are in context 0.
    const system2 = systemOf(prompts.ana[1]!);
    expect(system2).toContain('About you: An explorer of questions.\nYour values: curiosity; candour');
    expect(system2).toContain('Thinking method in use — socratic: Answer every claim with a question.');
    expect(systemOf(prompts.ana[0]!)).not.toContain('Thinking method in use');
    // Tick 3: the answer to her tick-2 question, from her task model, as an llm:task note.
    expect(userOf(prompts.ana[2]!)).toMatch(
      /from llm:task scripted:scripted-helper \(priority 2, llm_task,answer\): Answer from scripted:scripted-helper to your question \(llm_task\.ask a1\) "How many moons does Saturn have\?":\nSaturn has 146 known moons\./,
    );
    const asks = await db
      .select()
      .from(llmCalls)
      .where(and(eq(llmCalls.agentId, 'ana'), eq(llmCalls.purpose, 'llm_task')));
    expect(asks.map((c) => [c.ok, c.model, c.tick])).toEqual([[true, 'scripted-helper', 2]]);
    // Tick 4: the strategy she applied at tick 3 steers the think; tick 5's reflexes measured it.
    expect(userOf(prompts.ana[3]!)).toContain('Focus for this tick: Anti-stagnation meta-analysis');
    const [metric] = await db
      .select()
      .from(antiStagnationMetrics)
      .where(and(eq(antiStagnationMetrics.agentId, 'ana'), eq(antiStagnationMetrics.action, 'meta_analysis')));
    expect(metric).toMatchObject({ tick: 3, params: { source: 'command' } });
    expect(metric!.noveltyBefore).not.toBeNull();
    expect(metric!.noveltyAfter).not.toBeNull();
    expect(metric!.evaluatedAt).not.toBeNull();
    expect(metric!.effect).toBeCloseTo(metric!.noveltyAfter! - metric!.noveltyBefore!, 5);

    // Both messages went out on the bus as AgentMessage events of their senders.
    await until(
      () => messages.filter((m) => m.header.message_type === 'AgentMessage').length === 2,
      'two AgentMessage events',
    );
    const sent = messages
      .filter((m) => m.header.message_type === 'AgentMessage')
      .map((m) => m.payload as { agent_id: string; to: string; text: string });
    expect(sent.map((p) => [p.agent_id, p.to, p.text]).sort()).toEqual([
      ['ana', 'ben', 'Hello Ben, Ana here: what do you see?'],
      ['ben', 'ana', 'Hi Ana, I see you.'],
    ]);
    sub.unsubscribe();
  }, 180_000);
});
