/** Anti-stagnation's database side: what the diagnosis counts, and what a chosen strategy does. */
import { and, asc, eq, isNull, sql } from 'drizzle-orm';
import type { EmotionReading } from '../../core/emotions.js';
import type { ContextMode, LoopEffect } from '../../core/loop-types.js';
import { clipText } from '../../core/sanitize.js';
import type { StrategyAction } from '../../core/stagnation.js';
import type { Db } from '../../db/client.js';
import { executeNamed } from '../../db/prepared.js';
import {
  antiStagnationMetrics,
  concepts,
  diaryEntries,
  llmMemory,
  llmRegistry,
  notes,
  processLog,
} from '../../db/schema/index.js';
import type { TickReflexesInput } from './types.js';
import { askPeerForAngle } from './peers.js';
import type { PeerPresence } from '../../core/society/isolation.js';
import { readPeerPresence } from '../../db/queries/peer-presence.js';

/** Emotions that read as tiredness (a radical pause helps). */
const tiredEmotions = new Set(['boredom', 'fatigue', 'frustration', 'tiredness']);

/**
 * The counts the stagnation diagnosis reads (new inputs, data richness, the last rest) and how
 * often each strategy was evaluated, in one statement.
 */
export async function diagnosisInput(
  tx: Db,
  input: Pick<TickReflexesInput, 'agentId' | 'tick' | 'contextMode'>,
  previous: Array<{ tick: number; emotions: EmotionReading[]; contextMode: string }>,
) {
  const since = input.tick - 10;
  const agent = input.agentId;
  const live = (t: typeof diaryEntries | typeof llmMemory | typeof concepts) =>
    sql`(select count(*)::int from ${t} where ${t.agentId} = ${agent} and ${t.archivedAt} is null)`;
  const r = await executeNamed<{
    notes: number;
    processes: number;
    diary: number;
    memory: number;
    concepts: number;
    rest: number | null;
    evaluations: Array<{ id: number; n: number }> | null;
  }>(
    tx,
    'reflexes',
    sql`select
    (select count(*)::int from ${notes} where ${notes.agentId} = ${agent} and ${notes.direction} = 'in'
       and coalesce(${notes.tickSeen}, ${input.tick}) > ${since}) as notes,
    (select count(*)::int from ${processLog} where ${processLog.agentId} = ${agent} and ${processLog.tick} > ${since}
       and ${processLog.kind} not in ('emotions', 'memory_manager')) as processes,
    ${live(diaryEntries)} as diary,
    ${live(llmMemory)} as memory,
    ${live(concepts)} as concepts,
    (select max(${antiStagnationMetrics.tick}) from ${antiStagnationMetrics}
       where ${antiStagnationMetrics.agentId} = ${agent} and ${antiStagnationMetrics.action} = 'radical_pause') as rest,
    (select json_agg(json_build_object('id', e.strategy_id, 'n', e.n)) from (
       select ${antiStagnationMetrics.strategyId} as strategy_id, count(*)::int as n from ${antiStagnationMetrics}
       where ${antiStagnationMetrics.agentId} = ${agent} and ${antiStagnationMetrics.strategyId} is not null
         and ${antiStagnationMetrics.evaluatedAt} is not null
       group by ${antiStagnationMetrics.strategyId}) e) as evaluations`,
  );
  const c = r.rows[0]!;
  let sameModeTicks = 1;
  for (const r of previous) {
    if (r.contextMode !== input.contextMode) break;
    sameModeTicks++;
  }
  const tired = previous
    .slice(0, 5)
    .flatMap((r) => r.emotions.filter((e) => tiredEmotions.has(e.emotion)).map((e) => e.strength));
  return {
    newInputs: Number(c.notes) + Number(c.processes),
    sameModeTicks,
    dataRichness: Number(c.diary) + Number(c.memory) + Number(c.concepts),
    tiredness: tired.length ? tired.reduce((a, b) => a + b, 0) / Math.max(5, tired.length) : 0,
    ticksSinceRest: input.tick - Number(c.rest ?? 0),
    /** Evaluations per strategy id (strategies never evaluated are absent). */
    evaluations: new Map((c.evaluations ?? []).map((e) => [Number(e.id), Number(e.n)])),
  };
}

export async function applyStrategy(
  tx: Db,
  input: Pick<TickReflexesInput, 'agentId' | 'tick' | 'contextMode'> & { workflowId?: string },
  p: { action?: StrategyAction; ticks?: number },
  ownId: number | null,
  /** What asking a peer tells it (the reflexes pass the tick's snapshot; without it the peers are read now). */
  peerCtx?: { peers: readonly PeerPresence[]; novelty: number | null; thinking: string },
): Promise<{ effects: LoopEffect[]; focus?: string; detail: string }> {
  switch (p.action) {
    case 'ask_peers':
      return askPeerForAngle(
        tx,
        input,
        peerCtx ?? { peers: await readPeerPresence(tx, input.agentId), novelty: null, thinking: '' },
      );
    case 'note_user':
      await executeNamed(
        tx,
        'reflexes',
        tx.insert(notes).values({
          agentId: input.agentId,
          direction: 'out',
          source: 'agent',
          recipient: 'user',
          priority: 2,
          tags: ['anti_stagnation'],
          text: 'I keep circling the same thoughts. Could you give me something new: a question, a task, or material to read?',
        }),
      );
      return { effects: [], detail: 'asked the user for input' };
    case 'context_mode': {
      const mode: ContextMode = input.contextMode === 'meditation' ? 'standard' : 'meditation';
      return { effects: [{ kind: 'setContextMode', mode }], detail: `context mode ${input.contextMode} → ${mode}` };
    }
    case 'flashback': {
      const [entry] = await tx
        .select()
        .from(diaryEntries)
        .where(and(eq(diaryEntries.agentId, input.agentId), isNull(diaryEntries.archivedAt)))
        .orderBy(asc(diaryEntries.createdAt))
        .limit(1);
      if (!entry)
        return {
          effects: [],
          focus:
            'Anti-stagnation flashback: your diary is empty. Write down what you have learned so far, then look for something new.',
          detail: 'no diary entry to recall',
        };
      return {
        effects: [],
        focus: `Anti-stagnation flashback — a distant diary entry #${entry.id} "${entry.title}": ${clipText(entry.content, 600)}`,
        detail: `recalled diary #${entry.id}`,
      };
    }
    case 'meta_analysis':
      return {
        effects: [],
        focus:
          'Anti-stagnation meta-analysis: before anything else, analyse why your recent thoughts repeat and name one assumption to drop.',
        detail: 'meta-analysis prompt',
      };
    case 'switch_llm': {
      const rows = await tx
        .select()
        .from(llmRegistry)
        .where(
          and(
            eq(llmRegistry.agentId, input.agentId),
            eq(llmRegistry.role, 'agent'),
            eq(llmRegistry.enabled, true),
            eq(llmRegistry.excluded, false),
          ),
        )
        .orderBy(asc(llmRegistry.priority), asc(llmRegistry.id));
      const current = rows.find((r) => r.id === ownId) ?? rows[0];
      if (!current || rows.length < 2) return { effects: [], detail: 'no other LLM to switch to' };
      const last = Math.max(...rows.map((r) => r.priority));
      await tx
        .update(llmRegistry)
        .set({ priority: last + 1 })
        .where(eq(llmRegistry.id, current.id));
      return { effects: [], detail: `LLM ${current.name} moved behind the others` };
    }
    case 'pause': {
      const ticks = Math.max(1, Math.min(100, p.ticks ?? 3));
      return { effects: [{ kind: 'pause', ticks }], detail: `radical pause of ${ticks} ticks` };
    }
    default:
      return { effects: [], detail: `unknown strategy action ${String(p.action)}` };
  }
}
