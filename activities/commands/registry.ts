/**
 * The agent's models: `llm_registry.list` shows them by role in the order calls try them,
 * `llm_registry.select` puts one first for its role (the router takes rows by priority, so it is
 * the model used from the next tick), and `llm_task.ask` asks one of them a single question.
 * The ask only returns an `askLlm` loop effect: the model is called by the agent loop after this
 * transaction committed (no model call holds a database transaction open), and the answer
 * arrives as a note.
 */
import { and, asc, eq } from 'drizzle-orm';
import { llmRegistry, type LlmRegistryEntry } from '../../db/schema/index.js';
import { oneLine } from '../../core/sanitize.js';
import { CommandError, type FamilyTypes, type HandlerMap, type Tx } from './shared.js';

type Row = LlmRegistryEntry;

async function registryOf(tx: Tx, agentId: string): Promise<Row[]> {
  return tx
    .select()
    .from(llmRegistry)
    .where(eq(llmRegistry.agentId, agentId))
    .orderBy(asc(llmRegistry.role), asc(llmRegistry.priority), asc(llmRegistry.id));
}

const usable = (r: Row) => r.enabled && !r.excluded;

/** A model named by id or name (a digit string that is no name is taken as an id); the error names `field`. */
function resolveModel(rows: readonly Row[], ref: number | string, field: string): Row {
  const row =
    typeof ref === 'number'
      ? rows.find((r) => r.id === ref)
      : (rows.find((r) => r.name === ref) ?? (/^\d+$/.test(ref) ? rows.find((r) => r.id === Number(ref)) : undefined));
  if (!row)
    throw new CommandError(
      `${field}: no model '${ref}' in your registry (yours: ${rows.map((r) => `${r.name} #${r.id}`).join(', ') || 'none'})`,
    );
  if (row.role === 'embedder') throw new CommandError(`${field}: ${row.name} is an embedder, not a chat model`);
  if (!row.enabled) throw new CommandError(`${field}: ${row.name} is disabled`);
  if (row.excluded)
    throw new CommandError(
      `${field}: ${row.name} is excluded (${oneLine(row.excludedReason ?? 'no reason recorded', 120)})`,
    );
  return row;
}

/** Does `row` serve `role`? A validator is a row of role validator or one flagged `validator` (as the router picks them). */
const serves = (row: Row, role: string) => row.role === role || (role === 'validator' && row.validator);

export const registryHandlers: HandlerMap<FamilyTypes<'llm_registry'>> = {
  async 'llm_registry.list'({ tx, agentId }, a) {
    const rows = (await registryOf(tx, agentId)).filter(
      (r) => r.role !== 'embedder' && (a.role === undefined || serves(r, a.role)),
    );
    const firstOf = new Map<string, number>();
    for (const r of rows) if (usable(r) && !firstOf.has(r.role)) firstOf.set(r.role, r.id);
    const lines = rows.map((r) => {
      const state = !r.enabled
        ? ' [disabled]'
        : r.excluded
          ? ` [excluded: ${oneLine(r.excludedReason ?? '', 80)}]`
          : firstOf.get(r.role) === r.id
            ? ' [in use]'
            : '';
      return `#${r.id} ${r.name} — ${r.provider}:${r.model}, role ${r.role}${r.validator && r.role !== 'validator' ? ' (+validator)' : ''}, priority ${r.priority}${r.tier ? `, ${r.tier}` : ''}, trust ${r.trust}${state}`;
    });
    return {
      message: `${rows.length} model(s) in your registry`,
      text: lines.length ? lines.join('\n') : '(no models)',
    };
  },

  async 'llm_registry.select'({ tx, agentId }, a) {
    const rows = await registryOf(tx, agentId);
    const row = resolveModel(rows, a.model, 'model');
    const role = a.role ?? row.role;
    if (!serves(row, role)) throw new CommandError(`role: ${row.name} serves role ${row.role}, not ${role}`);
    const others = rows.filter((r) => r.id !== row.id && usable(r) && serves(r, role));
    const before = others.filter((r) => r.priority < row.priority || (r.priority === row.priority && r.id < row.id));
    if (before.length === 0) return { message: `${row.name} is already your first ${role} model` };
    // The router tries a role's rows by priority, lowest first: one below the lowest puts it first.
    const priority = Math.min(...others.map((r) => r.priority)) - 1;
    await tx
      .update(llmRegistry)
      .set({ priority, updatedAt: new Date() })
      .where(and(eq(llmRegistry.id, row.id), eq(llmRegistry.agentId, agentId)));
    return {
      message: `${row.name} (${row.provider}:${row.model}) is now your first ${role} model, before ${before.map((r) => r.name).join(', ')}; from your next tick`,
    };
  },
};

export const askHandlers: HandlerMap<'llm_task.ask'> = {
  async 'llm_task.ask'({ tx, agentId, tick, workflowId, logCmdId }, a) {
    const key = `${workflowId ?? `agent/${agentId}`}:${tick}:ask:${logCmdId}`;
    if (a.model !== undefined) {
      const row = resolveModel(await registryOf(tx, agentId), a.model, 'model');
      return {
        message: `asked ${row.name}; the answer comes as a note`,
        effects: [
          {
            kind: 'askLlm',
            cmdId: logCmdId,
            key,
            question: a.question,
            role: 'task',
            registryId: row.id,
            model: row.name,
          },
        ],
      };
    }
    // No model named: the registry's task models (with failover), else the agent's own.
    const [task] = await tx
      .select({ id: llmRegistry.id })
      .from(llmRegistry)
      .where(
        and(
          eq(llmRegistry.agentId, agentId),
          eq(llmRegistry.role, 'task'),
          eq(llmRegistry.enabled, true),
          eq(llmRegistry.excluded, false),
        ),
      )
      .limit(1);
    const role = task ? 'task' : 'agent';
    return {
      message: `asked your ${role} model; the answer comes as a note`,
      effects: [{ kind: 'askLlm', cmdId: logCmdId, key, question: a.question, role }],
    };
  },
};
