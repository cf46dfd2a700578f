/**
 * Agents among peers on the real Temporal dev server, a real migrated Postgres, the real
 * activities and scripted models (one behaviour per registry row):
 * - peer loss triggers failover: of two peers one stops; the other goes on alone in Isolated
 *   mode (logged, in its row and status, its applied commands tagged `emergency_consensus`)
 *   and returns to normal when the peer is back;
 * - the `ask_peers` anti-stagnation strategy: a stagnating agent asks its most trusted peer, the
 *   idle peer wakes and answers with `messages.send`, and the strategy's effect is measured;
 * - peer validators: a peer's own model rates the reply with this agent's trust in it as its
 *   weight; disagreeing with the consensus lowers that trust until the peer is no longer asked;
 * - existing agents get the new strategy by name; it is not chosen while no peer is reachable.
 */
import type { WorkflowHandle } from '@temporalio/client';
import { and, asc, eq } from 'drizzle-orm';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createActivities } from '../../activities/index.js';
import type { ScriptedReplyFn } from '../../activities/llm/index.js';
import { formatStatus } from '../../cli/status.js';
import { formatValidatorReport, validatorReport } from '../../cli/validators.js';
import { budgetIds } from '../../core/lifeforce.js';
import { renderCommandBlock } from '../../core/reply-parser.js';
import { defaultStrategies } from '../../core/stagnation.js';
import { linkPeers } from '../../db/queries/peers.js';
import {
  agentConfig,
  agentPeers,
  agents,
  antiStagnationMetrics,
  commandLog,
  lifeforceLedger,
  llmCalls,
  llmRecentResponses,
  llmRegistry,
  notes,
  processLog,
  stagnationStrategies,
} from '../../db/schema/index.js';
import type { AgentStatus, agentLoopWorkflow } from '../../workflows/agent-loop/index.js';
import { migratedDatabase, repoToolsDir, type MigratedDatabase } from '../helpers/env.js';
import { startLoop, untilStatus, withWorker } from '../helpers/harness.js';
import { startDevTemporal, type DevTemporal } from '../helpers/temporal.js';

type Call = Parameters<ScriptedReplyFn>[0];
interface Behaviour {
  think: (tick: number, prompt: string) => string;
  validate?: (prompt: string) => string;
}

let temporal: DevTemporal;
let database: MigratedDatabase;
let activities: ReturnType<typeof createActivities>;
const behaviours = new Map<number, Behaviour>();

const promptOf = (call: Call) => call.messages.map((m) => m.content).join('\n');
const letterWords = (s: string) => s.toLowerCase().match(/\p{L}{3,}/gu) ?? [];
/** A comparison model that reads the texts: each word of the NEW reply no PREVIOUS one has is worth 25. */
function noveltyAnswer(prompt: string): string {
  const prev = new Set(letterWords(prompt.slice(prompt.indexOf('PREVIOUS replies:'), prompt.indexOf('NEW reply:'))));
  const next = prompt.slice(
    prompt.indexOf('NEW reply:') + 'NEW reply:'.length,
    prompt.indexOf('Compare the NEW reply'),
  );
  const fresh = [...new Set(letterWords(next))].filter((w) => !prev.has(w));
  return JSON.stringify({ novelty: Math.min(100, 25 * fresh.length), new: fresh.slice(0, 3), tags: ['peers'] });
}

function reply(call: Call): string {
  const b = behaviours.get(call.registryId ?? -1);
  if (!b) throw new Error(`no behaviour for registry row ${call.registryId}`);
  const prompt = promptOf(call);
  if (call.purpose === 'emotion') return 'calm:2 (steady)';
  if (call.purpose === 'novelty') return noveltyAnswer(prompt);
  if (call.purpose === 'validate') return b.validate?.(prompt) ?? '+1 -- fine';
  const tick = Number(/tick (\d+), time/.exec(prompt)?.[1] ?? 0);
  return b.think(tick, prompt);
}

beforeAll(async () => {
  [database, temporal] = await Promise.all([
    migratedDatabase('mindloop_peer_failover', 8),
    startDevTemporal('peer-failover'),
  ]);
  activities = createActivities({ db: database.db, llm: { env: {}, toolsDir: repoToolsDir, scriptedReply: reply } });
}, 180_000);
afterAll(async () => {
  await temporal?.stop();
  await database?.dispose();
});

/** An agent with its own scripted model (and agent_config); returns the model's registry row id. */
async function addAgent(id: string, b: Behaviour, config: Record<string, unknown> = {}): Promise<number> {
  await database.db.insert(agents).values({ id, name: id });
  const [row] = await database.db
    .insert(llmRegistry)
    .values({ agentId: id, name: `${id}-mind`, provider: 'scripted', model: `${id}-mind`, role: 'agent', priority: 1 })
    .returning({ id: llmRegistry.id });
  behaviours.set(row!.id, b);
  const entries = Object.entries(config);
  if (entries.length)
    await database.db
      .insert(agentConfig)
      .values(entries.map(([key, value]) => ({ agentId: id, key, value: value as object })));
  return row!.id;
}

/** A peer whose loop runs elsewhere in this deployment: its row says running and just seen. */
const markRunning = (id: string) =>
  database.db.update(agents).set({ status: 'running', lastSeenAt: new Date() }).where(eq(agents.id, id));

const words =
  'river lantern orbit quartz meadow cipher harbor violet engine glacier whisper canyon ember prism falcon tundra mosaic comet anchor velvet'.split(
    ' ',
  );
const varied = (tick: number) =>
  `Tick ${tick}: the ${words[(tick * 7) % 20]} and the ${words[(tick * 3 + 5) % 20]}, a ${words[(tick * 11 + 2) % 20]} numbered ${tick * 13}.`;

/** An agent loop on `taskQueue` (the queue `withWorker` gives the test). */
const start = (taskQueue: string, agentId: string, input: Partial<Parameters<typeof agentLoopWorkflow>[0]> = {}) =>
  startLoop(temporal.client, taskQueue, { agentId, ...input });

async function stop(h: WorkflowHandle): Promise<void> {
  await h.signal('stop');
  await h.result();
}

describe('peers on real Temporal + Postgres with scripted models', () => {
  it('peer loss triggers failover: one of two peers stops, the other goes on alone (isolated, decisions tagged) and back to normal when it returns', async () => {
    await addAgent(
      'ada',
      {
        think: (t) =>
          `Ada thinks. ${varied(t)}\n${renderCommandBlock([{ cmdId: 'd', type: 'diary.add', args: { title: `day ${t}`, content: varied(t) } }])}`,
      },
      { isolation_ticks: 2 },
    );
    await addAgent('bob', { think: (t) => `Bob thinks. ${varied(t + 40)}` });
    await linkPeers(database.db, 'ada', 'bob');

    const [isolated, back] = await withWorker(temporal, { workflowBundle: temporal.bundle, activities }, async (q) => {
      let bob = await start(q, 'bob', { settings: { delayMs: 200 } });
      await untilStatus(bob, (s) => s.tick >= 1, 'bob ticking', 60_000);
      const ada = await start(q, 'ada', { settings: { delayMs: 300 } });
      const normal = await untilStatus(ada, (s) => s.tick >= 2, 'ada ticking', 60_000);
      expect(normal.operatingMode).toBe('normal');
      expect(normal.isolation).toMatchObject({ known: 1, reachable: ['bob'], since: null });

      await stop(bob); // its row: stopped
      const isolated = await untilStatus(ada, (s) => s.operatingMode === 'isolated', 'ada isolated', 60_000);
      await untilStatus(ada, (s) => s.tick >= (isolated.isolation.sinceTick ?? 0) + 2, 'ada deciding alone', 60_000);
      const [row] = await database.db.select({ mode: agents.operatingMode }).from(agents).where(eq(agents.id, 'ada'));
      expect(row!.mode).toBe('isolated');

      bob = await start(q, 'bob', { settings: { delayMs: 200 } });
      const back = await untilStatus(ada, (s) => s.operatingMode === 'normal', 'ada back to normal', 60_000);
      await untilStatus(ada, (s) => s.tick >= back.tick + 2, 'ada deciding with a peer again', 60_000);
      await stop(ada);
      await stop(bob);
      return [isolated, back];
    });

    expect(isolated.isolation).toMatchObject({ known: 1, reachable: [] });
    expect(isolated.isolation.unreachableTicks).toBeGreaterThanOrEqual(2);
    expect(formatStatus(isolated)).toMatch(/mode isolated/);
    expect(formatStatus(isolated)).toMatch(
      /ISOLATED {5}since .* none of 1 known peer\(s\) reachable for \d+ tick\(s\); applied commands tagged emergency_consensus/,
    );
    expect(back.isolation).toMatchObject({ since: null, unreachableTicks: 0, reachable: ['bob'] });
    expect(formatStatus(back)).toContain('peers        reachable: bob (1 known)');

    const log = await database.db
      .select()
      .from(processLog)
      .where(and(eq(processLog.agentId, 'ada'), eq(processLog.kind, 'isolation')))
      .orderBy(asc(processLog.id));
    expect(log.map((l) => l.status)).toEqual(['warning', 'close']);
    const [entered, left] = [log[0]!.tick!, log[1]!.tick!];
    expect(entered).toBe(isolated.isolation.sinceTick);
    expect(log[0]!.message).toMatch(/^isolated: none of 1 known peer\(s\) reachable for 2 tick\(s\)/);
    expect(log[1]!.message).toBe(`no longer isolated: 1 peer(s) reachable again (bob); isolated since tick ${entered}`);
    expect(log.every((l) => l.closedAt !== null)).toBe(true); // the warning left the context when it closed
    const [ada] = await database.db.select().from(agents).where(eq(agents.id, 'ada'));
    expect(ada!.operatingMode).toBe('normal');

    // Exactly the commands applied while isolated carry the tag.
    const applied = await database.db
      .select({ tick: commandLog.tick, tags: commandLog.tags })
      .from(commandLog)
      .where(and(eq(commandLog.agentId, 'ada'), eq(commandLog.status, 'applied')))
      .orderBy(asc(commandLog.tick));
    const taggedTicks = applied.filter((c) => c.tags.includes('emergency_consensus')).map((c) => c.tick);
    expect(taggedTicks.length).toBeGreaterThanOrEqual(2);
    expect(taggedTicks).toEqual(applied.map((c) => c.tick).filter((t) => t >= entered && t < left));
    expect(applied.some((c) => c.tick < entered && c.tags.length === 0)).toBe(true);
    expect(applied.some((c) => c.tick >= left && c.tags.length === 0)).toBe(true);
    // Bob never lost its peer: never isolated.
    expect(
      await database.db
        .select()
        .from(processLog)
        .where(and(eq(processLog.agentId, 'bob'), eq(processLog.kind, 'isolation'))),
    ).toEqual([]);
  }, 240_000);

  it('ask_peers: a stagnating agent asks its most trusted peer, the idle peer wakes and answers with messages.send, and the effect is measured', async () => {
    let heard = false;
    const same = 'I keep turning the same single thought over and over.';
    await addAgent('stuck', {
      think: (t, prompt) => {
        if (prompt.includes('harbor lights at dusk')) heard = true;
        return t === 1 ? varied(1) : heard ? varied(t + 60) : same;
      },
    });
    await addAgent('sage', {
      think: (t, prompt) =>
        prompt.includes('stuck is stuck')
          ? `Someone needs a new angle.\n${renderCommandBlock([{ cmdId: 'm', type: 'messages.send', args: { to: 'stuck', text: 'A new angle: picture the harbor lights at dusk and ask who keeps them burning.' } }])}`
          : `Sage rests at tick ${t}.`,
    });
    await addAgent('lesser', { think: () => 'Lesser rests.' });
    await linkPeers(database.db, 'stuck', 'sage');
    await linkPeers(database.db, 'stuck', 'lesser');
    await database.db
      .update(agentPeers)
      .set({ trust: 0.8 })
      .where(and(eq(agentPeers.agentId, 'stuck'), eq(agentPeers.peerAgentId, 'sage')));
    await markRunning('lesser'); // reachable, but less trusted: not the one asked

    await withWorker(temporal, { workflowBundle: temporal.bundle, activities }, async (q) => {
      // Sage idles until a note arrives (no timeout): only the wake the ask sends gets it thinking.
      const sage = await start(q, 'sage', {
        settings: { delayMs: 100, idle: { on: true, wakeOn: ['note'], timeoutMs: 3_600_000 } },
      });
      await untilStatus(sage, (s) => s.tick === 1 && s.phase === 'idle', 'sage idle', 60_000);
      const stuck = await start(q, 'stuck', { maxTicks: 9, settings: { delayMs: 2000 } });
      await stuck.result();
      expect((await sage.query<AgentStatus>('status')).tick).toBe(2); // woken once, by the ask
      await stop(sage);
    });

    const [metric] = await database.db
      .select()
      .from(antiStagnationMetrics)
      .where(and(eq(antiStagnationMetrics.agentId, 'stuck'), eq(antiStagnationMetrics.action, 'ask_peers')));
    expect(metric).toMatchObject({ diagnosis: 'no_new_data', noveltyBefore: 0 });
    expect(String((metric!.params as { detail: string }).detail)).toMatch(
      /^asked peer sage \(trust 0\.8\) for a new angle: note #\d+$/,
    );

    const asked = await database.db
      .select()
      .from(notes)
      .where(and(eq(notes.agentId, 'sage'), eq(notes.direction, 'in')));
    expect(asked).toHaveLength(1);
    expect(asked[0]).toMatchObject({
      source: 'peer',
      sender: 'stuck',
      tags: ['ask_peers', 'anti_stagnation'],
      tickSeen: 2,
    });
    expect(asked[0]!.text).toContain('I keep turning the same single thought');
    expect(
      await database.db
        .select()
        .from(notes)
        .where(and(eq(notes.agentId, 'lesser'), eq(notes.direction, 'in'))),
    ).toEqual([]);
    const [sent] = await database.db
      .select()
      .from(commandLog)
      .where(and(eq(commandLog.agentId, 'sage'), eq(commandLog.type, 'messages.send')));
    expect(sent!.status).toBe('applied');

    const answer = await database.db
      .select()
      .from(notes)
      .where(and(eq(notes.agentId, 'stuck'), eq(notes.direction, 'in'), eq(notes.source, 'peer')));
    expect(answer.map((n) => n.sender)).toEqual(['sage']);
    expect(answer[0]!.tickSeen).not.toBeNull();

    // Measured like any strategy: novelty before (0) and after, its mean effect.
    const [measured] = await database.db
      .select()
      .from(antiStagnationMetrics)
      .where(eq(antiStagnationMetrics.id, metric!.id));
    expect(measured!.tick + 2).toBeLessThanOrEqual(9);
    expect(measured!.noveltyAfter).not.toBeNull();
    expect(measured!.effect).toBeGreaterThan(35);
    const [strategy] = await database.db
      .select()
      .from(stagnationStrategies)
      .where(and(eq(stagnationStrategies.agentId, 'stuck'), eq(stagnationStrategies.name, 'ask_peers')));
    expect(strategy).toMatchObject({ uses: 1, meanEffect: measured!.effect });
    const after = await database.db
      .select()
      .from(llmRecentResponses)
      .where(and(eq(llmRecentResponses.agentId, 'stuck'), eq(llmRecentResponses.tick, measured!.tick + 2)));
    expect(after[0]!.stagnationActions).toContain(`evaluated:ask_peers:+${measured!.effect}`);
  }, 240_000);

  it("peer validators: the peer's own model rates the reply, weighted by the trust in it; far from the consensus it loses that trust and is no longer asked", async () => {
    const criticRow = await addAgent('critic', { think: () => 'unused', validate: () => '-3 -- nonsense' });
    await addAgent(
      'writer',
      {
        think: (t) =>
          `Draft ${t}. ${varied(t)}\n${renderCommandBlock([{ cmdId: 'd', type: 'diary.add', args: { title: `draft ${t}`, content: 'x' } }])}`,
      },
      { peer_validators: 1 },
    );
    const [val] = await database.db
      .insert(llmRegistry)
      .values({
        agentId: 'writer',
        name: 'val',
        provider: 'scripted',
        model: 'val',
        role: 'validator',
        validator: true,
        priority: 10,
        trust: 1,
      })
      .returning();
    behaviours.set(val!.id, { think: () => 'unused', validate: () => '+3 -- good' });
    await linkPeers(database.db, 'writer', 'critic');
    await markRunning('critic');

    const friendRow = await addAgent('friend', {
      think: () => 'unused',
      validate: (p) => (p.includes('Essay') ? '+3 -- lovely' : '0 -- ?'),
    });
    await addAgent('author', { think: (t) => `Essay ${t}. ${varied(t + 20)}` }, { peer_validators: 2 });
    await linkPeers(database.db, 'author', 'friend');
    await markRunning('friend');

    await withWorker(temporal, { workflowBundle: temporal.bundle, activities }, async (q) => {
      const w = await start(q, 'writer', { maxTicks: 3, settings: { delayMs: 100 } });
      const a = await start(q, 'author', { maxTicks: 2, settings: { delayMs: 100 } });
      await Promise.all([w.result(), a.result()]);
    });

    const rows = async (id: string) =>
      database.db
        .select()
        .from(llmRecentResponses)
        .where(eq(llmRecentResponses.agentId, id))
        .orderBy(asc(llmRecentResponses.tick));
    const w = await rows('writer');
    expect(w[0]!.validationMode).toBe('normal');
    expect(w[0]!.rating).toBe(1); // (3·1 − 3·0.5) / 1.5
    expect(w[0]!.distribution).toMatchObject({ '3': 1, '-3': 1 });
    expect(w[0]!.validators.map((v) => ({ ...v, latencyMs: undefined }))).toEqual([
      { registryId: val!.id, name: 'val', trust: 1, status: 'ok', rating: 3, comment: 'good', latencyMs: undefined },
      {
        registryId: criticRow,
        name: 'peer critic',
        trust: 0.5,
        peer: 'critic',
        status: 'ok',
        rating: -3,
        comment: 'nonsense',
        latencyMs: undefined,
      },
    ]);
    const [link] = await database.db
      .select()
      .from(agentPeers)
      .where(and(eq(agentPeers.agentId, 'writer'), eq(agentPeers.peerAgentId, 'critic')));
    expect(link!.trust).toBeCloseTo(0.05); // 0.5 − 0.15·(1 + (4 − 2))
    expect(link!.status).toBe('active'); // still a peer, only no longer a validator
    const told = await database.db
      .select()
      .from(notes)
      .where(and(eq(notes.agentId, 'writer'), eq(notes.source, 'system')));
    expect(told.map((n) => n.text)).toEqual([
      'Peer "critic" no longer validates your replies: your trust in it fell to 0.05 (far from the consensus).',
    ]);
    expect(w.slice(1).map((r) => r.validators.map((v) => v.name))).toEqual([['val'], ['val']]);
    expect(w.slice(1).map((r) => r.rating)).toEqual([3, 3]);
    const log = await database.db
      .select()
      .from(commandLog)
      .where(eq(commandLog.agentId, 'writer'))
      .orderBy(asc(commandLog.tick));
    expect(log.map((c) => c.status)).toEqual(['applied', 'applied', 'applied']);
    // `mindloop validators writer`: the peer beside the registry's validator, excluded.
    const report = await validatorReport(database.db, 'writer');
    expect(report.map((r) => [r.name, r.asked, r.excluded])).toEqual([
      ['val', 3, false],
      ['peer critic', 1, true],
    ]);
    expect(report[1]).toMatchObject({ registryId: criticRow, trust: 0.05, drift: -4 });
    expect(formatValidatorReport('writer', report)).toMatch(
      /peer critic .* excluded: trust 0\.05 below 0\.4: no longer asked/,
    );

    // Only a peer validates: a normal validation; agreeing with the consensus earns trust back.
    const a = await rows('author');
    expect(a.map((r) => [r.validationMode, r.rating])).toEqual([
      ['normal', 3],
      ['normal', 3],
    ]);
    expect(a[1]!.validators).toMatchObject([{ peer: 'friend', registryId: friendRow, trust: 0.52 }]);
    const [fl] = await database.db
      .select()
      .from(agentPeers)
      .where(and(eq(agentPeers.agentId, 'author'), eq(agentPeers.peerAgentId, 'friend')));
    expect(fl!.trust).toBeCloseTo(0.54);
    // The friend's model answered (its call is recorded under it); the author, who asked, paid.
    const calls = await database.db
      .select()
      .from(llmCalls)
      .where(and(eq(llmCalls.agentId, 'friend'), eq(llmCalls.ok, true)))
      .orderBy(asc(llmCalls.tick));
    expect(calls.map((c) => [c.purpose, c.workflowId, c.tick])).toEqual([
      ['validate', 'agent/author', 1],
      ['validate', 'agent/author', 2],
    ]);
    const charged = await database.db
      .select()
      .from(lifeforceLedger)
      .where(eq(lifeforceLedger.idempotencyKey, `llm:agent/author:1:validate:peer:friend@${friendRow}`));
    expect(charged.map((l) => l.budgetId)).toEqual([budgetIds.agent('author')]);
  }, 240_000);

  it("an existing agent gets ask_peers by name, keeping its strategies' records; it is chosen only while a peer is reachable", async () => {
    await addAgent('veteran', { think: () => 'unused' });
    await addAgent('faraway', { think: () => 'unused' });
    await linkPeers(database.db, 'veteran', 'faraway');
    await database.db.update(agents).set({ status: 'stopped', lastSeenAt: new Date() }).where(eq(agents.id, 'faraway'));
    // Seeded before ask_peers existed, with a record of its own.
    await database.db.insert(stagnationStrategies).values(
      defaultStrategies
        .filter((s) => s.name !== 'ask_peers')
        .map((s) => ({
          agentId: 'veteran',
          name: s.name,
          class: s.class,
          cost: s.cost,
          params: s.params,
          ...(s.name === 'ask_user' ? { uses: 3, meanEffect: 5 } : {}),
        })),
    );
    const same = 'Nothing new, the same thought again.';
    await database.db
      .insert(llmRecentResponses)
      .values([1, 2].map((tick) => ({ agentId: 'veteran', tick, content: same })));
    const params = { temperature: 0.7, topP: 0.9, presencePenalty: 0, frequencyPenalty: 0 };
    const stagnant = async (tick: number) => {
      const [row] = await database.db
        .insert(llmRecentResponses)
        .values({ agentId: 'veteran', tick, content: same })
        .returning();
      return activities.tickReflexes({
        agentId: 'veteran',
        tick,
        workflowId: 'agent/veteran',
        responseId: row!.id,
        commands: [],
        params,
        defaults: params,
        stagnation: { lowStreak: 2, anxietyStreak: 0, pending: null, lastStrategyTick: 0 },
        contextMode: 'standard',
      });
    };

    const alone = await stagnant(3);
    expect(alone.actions).toContain('strategy:ask_user (no_new_data)'); // its only peer is stopped
    expect(alone.effects).toEqual([]);
    const strategies = Object.fromEntries(
      (await database.db.select().from(stagnationStrategies).where(eq(stagnationStrategies.agentId, 'veteran'))).map(
        (s) => [s.name, s],
      ),
    );
    expect(Object.keys(strategies).sort()).toEqual(defaultStrategies.map((s) => s.name).sort());
    expect(strategies.ask_peers).toMatchObject({
      uses: 0,
      cost: 0.5,
      class: 'no_new_data',
      params: { action: 'ask_peers' },
    });
    expect(strategies.ask_user).toMatchObject({ uses: 4, meanEffect: 5 });

    await markRunning('faraway');
    const asking = await stagnant(4);
    expect(asking.actions).toContain('strategy:ask_peers (no_new_data)');
    expect(asking.effects).toEqual([{ kind: 'wakeAgent', agentId: 'faraway' }]);
    const inbox = await database.db
      .select()
      .from(notes)
      .where(and(eq(notes.agentId, 'faraway'), eq(notes.direction, 'in')));
    expect(inbox).toHaveLength(1);
    expect(inbox[0]).toMatchObject({ source: 'peer', sender: 'veteran', tags: ['ask_peers', 'anti_stagnation'] });
    expect(inbox[0]!.text).toContain('messages.send {"to": "veteran"');
    // A retried activity returns the recorded verdict: no second message.
    const [row4] = await database.db
      .select()
      .from(llmRecentResponses)
      .where(and(eq(llmRecentResponses.agentId, 'veteran'), eq(llmRecentResponses.tick, 4)));
    const again = await activities.tickReflexes({
      agentId: 'veteran',
      tick: 4,
      workflowId: 'agent/veteran',
      responseId: row4!.id,
      commands: [],
      params,
      defaults: params,
      stagnation: { lowStreak: 2, anxietyStreak: 0, pending: null, lastStrategyTick: 0 },
      contextMode: 'standard',
    });
    expect(again.effects).toEqual(asking.effects);
    expect(
      await database.db
        .select()
        .from(notes)
        .where(and(eq(notes.agentId, 'faraway'), eq(notes.direction, 'in'))),
    ).toHaveLength(1);
  }, 120_000);
});
