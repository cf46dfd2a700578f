/**
 * The spawn workflow's steps. Each is idempotent on the child's id: a retry (after a worker
 * died, or the database came back) finds the first attempt's record, copy, ledger entries and
 * note instead of repeating them. The copy is one transaction: a worker killed in the middle of
 * it leaves nothing of the child behind.
 */
import { eq } from 'drizzle-orm';
import { z } from 'zod';
import { agentIdSchema } from '../../core/ids.js';
import { available as availableOf, budgetIds, lfRound, regenerate } from '../../core/lifeforce.js';
import {
  childNameSchema,
  spawnBudgetSchema,
  spawnGoalsSchema,
  spawnOutcomes,
  spawnTypes,
  type SpawnOutcome,
} from '../../core/society/spawn.js';
import type { Db } from '../../db/client.js';
import {
  defaultCarveShare,
  ensureBudget,
  grantLifeforce,
  reserve,
  settle,
  stateOf,
} from '../../db/queries/lifeforce.js';
import {
  admitSpawn,
  createSpawnCopy,
  lockLineage,
  noteToParent,
  openSpawn,
  removeUnbornChild,
  spawnRecord,
} from '../../db/queries/spawns.js';
import { agents, lifeforceBudgets, lifeforceLedger, spawns, type Spawn } from '../../db/schema/index.js';
import { ErrorType, nonRetryable, parseInput } from '../errors.js';
import { withHeartbeat } from '../heartbeat.js';

type Tx = Parameters<Parameters<Db['transaction']>[0]>[0];

interface SpawnDeps {
  db: Db;
  /** Whether the lifeforce ledger is on: off, a child gets no carved budget (its spend is not charged either). */
  ledger: boolean;
}

const ids = z.strictObject({ parentId: agentIdSchema, childId: childNameSchema });
const beginInput = ids.extend({
  type: z.enum(spawnTypes),
  goals: spawnGoalsSchema,
  budget: spawnBudgetSchema.optional(),
  workflowId: z.string().min(1).max(300),
});
const copyInput = ids.extend({ startedAtMs: z.number().int().min(0) });
const finishInput = ids.extend({
  workflowId: z.string().min(1).max(300),
  /** False when it was not admitted (refused, or ended before the answer): a record of a refusal is written already. */
  admitted: z.boolean(),
  outcome: z.enum(spawnOutcomes),
  reason: z.string().max(2000).optional(),
  note: z.string().min(1).max(4000),
  noteKey: z.string().min(1).max(500),
});

export type SpawnBegun =
  | { status: 'copying' | 'ready'; generation: number; resumed: boolean }
  | { status: 'refused'; reason: string; generation?: number };

export type SpawnFunded = { ok: true; budget: number | null } | { ok: false; reason: string };

/**
 * The ledger key of the parent's debit for the child: one per attempt of a name (a name a
 * rolled-back spawn left free may be tried again, and is debited again).
 */
const debitKey = (row: Pick<Spawn, 'childAgentId' | 'createdAt'>) =>
  `spawn:${row.childAgentId}@${row.createdAt.getTime()}`;

/** The spawn workflow's activities (workflows/spawn.ts), over the database and the lifeforce ledger. */
export function createSpawnActivities(deps: SpawnDeps) {
  return { ...spawnBirthActivities(deps), ...spawnSettlementActivities(deps) };
}

/** The child's making: admission and its record, then the copy of its parent. */
function spawnBirthActivities({ db, ledger }: SpawnDeps) {
  return {
    /**
     * Admit the spawn or refuse it (the parent missing, the name taken, a limit reached, a
     * budget the parent cannot give), and open its record. A spawn of this workflow left
     * unfinished is resumed where it is.
     */
    async spawnBegin(raw: z.input<typeof beginInput>): Promise<SpawnBegun> {
      const i = parseInput('spawnBegin', beginInput, raw);
      return db.transaction(async (tx) => {
        await lockLineage(tx, i.parentId);
        const row = await spawnRecord(tx, i.childId, true);
        // This workflow's spawn left unfinished (its run ended before the child ran): resumed where
        // it is. One that finished is final: asking again under its name is refused below.
        if (
          row &&
          row.agentId === i.parentId &&
          row.workflowId === i.workflowId &&
          (row.status === 'copying' || row.status === 'ready')
        ) {
          return { status: row.status, generation: row.generation, resumed: true };
        }
        const admitted = await admitSpawn(tx, { parentId: i.parentId, childId: i.childId });
        if (!admitted.ok && admitted.code !== 'limit') {
          // No record: a taken name is another's, and a missing parent has none.
          return {
            status: 'refused' as const,
            reason: admitted.reason,
            ...(admitted.parent ? { generation: admitted.parent.generation + 1 } : {}),
          };
        }
        const generation = admitted.ok ? admitted.generation : admitted.parent!.generation + 1;
        const reason = admitted.ok
          ? i.budget !== undefined && ledger
            ? await unaffordable(tx, i.parentId, i.budget)
            : null
          : admitted.reason;
        const record = {
          parentId: i.parentId,
          childId: i.childId,
          type: i.type,
          generation,
          goals: i.goals,
          budget: i.budget ?? 0,
          workflowId: i.workflowId,
        };
        if (reason) {
          await openSpawn(tx, { ...record, status: 'refused', reason });
          return { status: 'refused' as const, reason, generation };
        }
        await openSpawn(tx, record);
        return { status: 'copying' as const, generation, resumed: false };
      });
    },

    /**
     * The child's birth, in one transaction: its agent row, the copy of its parent's rows for
     * its type, its goals and the peer link with its parent; the record becomes `ready`. A
     * record past `copying` answers what it holds.
     */
    async spawnCopy(
      raw: z.input<typeof copyInput>,
    ): Promise<{ copied: Record<string, number>; rows: number; spawnMs: number }> {
      const i = parseInput('spawnCopy', copyInput, raw);
      return withHeartbeat(
        () =>
          // One snapshot for every table read, so a parent writing meanwhile never gives the child
          // a row whose reference points at a row the copy did not see.
          db.transaction(
            async (tx) => {
              const row = await spawnRecord(tx, i.childId, true);
              if (!row || row.agentId !== i.parentId)
                throw nonRetryable(ErrorType.NotFound, `no spawn of ${i.childId} by ${i.parentId}`);
              if (row.status !== 'copying') {
                if (row.status === 'refused' || row.status === 'rolled_back')
                  throw nonRetryable(
                    ErrorType.InvalidRequest,
                    `spawn of ${i.childId} was ${row.status}: ${row.reason ?? ''}`,
                  );
                return { copied: row.copied, rows: row.rows, spawnMs: row.spawnMs ?? 0 };
              }
              const [parent] = await tx.select().from(agents).where(eq(agents.id, i.parentId));
              if (!parent) throw nonRetryable(ErrorType.NotFound, `agent ${i.parentId} no longer exists`);
              const copy = await createSpawnCopy(tx, { parent, spawn: row });
              const spawnMs = Math.max(0, Date.now() - i.startedAtMs);
              await tx
                .update(spawns)
                .set({ status: 'ready', copied: copy.copied, rows: copy.rows, spawnMs })
                .where(eq(spawns.id, row.id));
              return { ...copy, spawnMs };
            },
            { isolationLevel: 'repeatable read' },
          ),
        { details: { childId: i.childId } },
      );
    },
  };
}

/** After the copy: the child's lifeforce carved from its parent's, and the spawn's end (undone children refunded). */
function spawnSettlementActivities({ db, ledger }: SpawnDeps) {
  return {
    /**
     * The child's lifeforce: its budget carved from the parent's through the ledger, a debit on
     * the parent (`spawn:<child>`, reserved and settled once) and the child's budget funded with
     * it. With no amount asked for, an unlimited parent gives an unlimited child and a limited one
     * a quarter of what it has available. `ok: false` when the parent cannot give it.
     */
    async spawnFund(raw: z.input<typeof ids>): Promise<SpawnFunded> {
      const i = parseInput('spawnFund', ids, raw);
      const row = await spawnRecord(db, i.childId);
      if (!row || row.agentId !== i.parentId || (row.status !== 'ready' && row.status !== 'running'))
        throw nonRetryable(
          ErrorType.InvalidRequest,
          `spawn of ${i.childId} is not ready to fund (${row?.status ?? 'no record'})`,
        );
      const childBudget = budgetIds.agent(i.childId);
      if (!ledger) return { ok: true, budget: null };
      const [parentBudget] = await db
        .select()
        .from(lifeforceBudgets)
        .where(eq(lifeforceBudgets.id, budgetIds.agent(i.parentId)));
      const [debited] = await db
        .select({ amount: lifeforceLedger.amount })
        .from(lifeforceLedger)
        .where(eq(lifeforceLedger.idempotencyKey, debitKey(row)));
      let amount: number | null = debited ? debited.amount : row.budget > 0 ? row.budget : null;
      if (amount === null) {
        if (!parentBudget || parentBudget.capacity === null) {
          await ensureBudget(db, { id: childBudget, agentId: i.childId, scope: 'agent', settings: { capacity: null } });
          return { ok: true, budget: null };
        }
        amount =
          Math.floor((availableOf(regenerate(stateOf(parentBudget), Date.now())) ?? 0) * defaultCarveShare * 10_000) /
          10_000;
        if (amount <= 0) return { ok: false, reason: `lifeforce: ${i.parentId} has none available to give` };
      }
      const held = await reserve(db, {
        key: debitKey(row),
        budgetId: budgetIds.agent(i.parentId),
        amount,
        operation: 'spawn',
        ttlMs: null,
        reason: `budget of descendant ${i.childId}`,
      });
      if (!held.ok)
        return {
          ok: false,
          reason: `lifeforce: ${i.parentId} cannot give ${amount} LF (${held.reason}; ${held.available ?? 'unlimited'} available)`,
        };
      await settle(db, held.key, held.amount, { child: i.childId });
      await ensureBudget(db, {
        id: childBudget,
        agentId: i.childId,
        scope: 'agent',
        settings: { capacity: held.amount },
      });
      if (row.budget !== held.amount) await db.update(spawns).set({ budget: held.amount }).where(eq(spawns.id, row.id));
      return { ok: true, budget: held.amount };
    },

    /**
     * End the spawn: `running` marks the record (the child's loop is started); `refused` and
     * `rolled_back` remove a child that never ran and give the parent back what was debited for
     * it. The parent gets the note either way, once. A refusal of the admission has its record
     * already (if it has one): only the note is left to send.
     */
    async spawnFinish(raw: z.input<typeof finishInput>): Promise<{ status: SpawnOutcome | 'none' }> {
      const i = parseInput('spawnFinish', finishInput, raw);
      const { status, row } = await db.transaction(async (tx) => {
        const found = await spawnRecord(tx, i.childId, true);
        // Only this workflow's record is its to end (a taken name's record is another's); one it
        // left in flight is, even when the workflow ended before it heard it was admitted.
        const mine = found && found.agentId === i.parentId && found.workflowId === i.workflowId;
        const ours = mine && (i.admitted || found.status === 'copying' || found.status === 'ready') ? found : undefined;
        let status: SpawnOutcome | 'none' = 'none';
        if (ours && i.outcome === 'running') {
          if (ours.status !== 'ready' && ours.status !== 'running')
            throw nonRetryable(ErrorType.InvalidRequest, `spawn of ${i.childId} is ${ours.status}, not ready to run`);
          if (ours.status === 'ready')
            await tx.update(spawns).set({ status: 'running', finishedAt: new Date() }).where(eq(spawns.id, ours.id));
          status = 'running';
        } else if (ours?.status === 'running') {
          // A child that runs is never undone.
          status = 'running';
        } else if (ours) {
          await removeUnbornChild(tx, ours);
          await tx
            .update(spawns)
            .set({ status: i.outcome, reason: i.reason ?? ours.reason, finishedAt: new Date() })
            .where(eq(spawns.id, ours.id));
          status = i.outcome;
        }
        await noteToParent(tx, { parentId: i.parentId, childId: i.childId, text: i.note, key: i.noteKey });
        return { status, row: ours };
      });
      if (row && (status === 'refused' || status === 'rolled_back')) await refundDebit(db, i.parentId, row);
      return { status };
    },
  };
}

/** Why the parent's budget cannot give `amount` now, or null (no budget yet: it is created unlimited on first use). */
async function unaffordable(db: Db | Tx, parentId: string, amount: number): Promise<string | null> {
  const [b] = await db
    .select()
    .from(lifeforceBudgets)
    .where(eq(lifeforceBudgets.id, budgetIds.agent(parentId)));
  if (!b) return null;
  if (b.closedAt) return `lifeforce: the budget of ${parentId} is closed`;
  const left = availableOf(regenerate(stateOf(b), Date.now()));
  return left === null || left >= amount
    ? null
    : `lifeforce: ${parentId} cannot give ${amount} LF (${lfRound(left)} available)`;
}

/** Give the parent back what was debited for a child that was undone (once: its own ledger key). */
async function refundDebit(db: Db, parentId: string, row: Spawn): Promise<void> {
  const [settled] = await db
    .select({ amount: lifeforceLedger.amount })
    .from(lifeforceLedger)
    .where(eq(lifeforceLedger.idempotencyKey, `close:${debitKey(row)}`));
  if (!settled || settled.amount <= 0) return;
  await grantLifeforce(db, {
    budgetId: budgetIds.agent(parentId),
    amount: settled.amount,
    key: `refund:${debitKey(row)}`,
    reason: `descendant ${row.childAgentId} was undone`,
  });
}
