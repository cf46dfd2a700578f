/**
 * An agent's state copied under a new agent id (a successor fork's isolated copy, a spawned
 * descendant): the rows the parent owns in every table, or in a chosen subset, copied in one
 * transaction with `INSERT … SELECT` per table, ids remapped so that references between the
 * copied tables (goals ← goal_links/tasks, concepts ← links, …) stay consistent. The plan is
 * derived from the Drizzle schema at run time, so a table or a foreign key added later is
 * copied too. The parent's rows are only read.
 */
import { getTableName, sql, type SQL } from 'drizzle-orm';
import { getTableConfig, type PgTable } from 'drizzle-orm/pg-core';
import type { Db } from '../client.js';
import {
  agentOwnedTables,
  agents,
  forks,
  forkToolRegistry,
  spawns,
  tickPrompts,
  toolRegistry,
  verdicts,
  type Agent,
} from '../schema/index.js';

type Tx = Parameters<Parameters<Db['transaction']>[0]>[0];

/**
 * Not copied: the parent's own fork records and verdicts (a fork of a fork's bookkeeping would
 * duplicate unique `verdicts.fork_id` rows and is not agent state), the descendants it
 * spawned (the copy did not spawn them), and the prompts its ticks sent (a record of what the
 * parent's model was shown, up to 64 KB a tick, which no context is built from; the copy's
 * notebook shows the inherited ticks rebuilt from the rows it did copy).
 */
const skipped = new Set<PgTable>([forks, verdicts, spawns, tickPrompts]);

/** Where a copy goes: `target` is the new agent id; `prefix` goes before copied text ids and globally unique keys. */
interface CopyTarget {
  parent: string;
  target: string;
  prefix: string;
}

interface TablePlan {
  name: string;
  /** `bigint` identity ids get fresh sequence values; text ids get the target's prefix. */
  idKind: 'bigint' | 'text';
  insert: (p: CopyTarget) => SQL;
  map: (p: CopyTarget) => SQL;
}

const q = (name: string) => sql.raw(`"${name.replaceAll('"', '""')}"`);
const mapName = (table: string) => `fork_map_${table}`;
const ownedNames: ReadonlySet<string> = new Set(agentOwnedTables.map((t) => getTableName(t)));

function planTable(table: PgTable, copied: ReadonlySet<string>): TablePlan {
  const cfg = getTableConfig(table);
  const name = cfg.name;
  const idCol = cfg.columns.find((c) => c.name === 'id');
  if (!idCol) throw new Error(`fork copy: table ${name} has no id column`);
  const idKind = idCol.columnType === 'PgText' ? 'text' : 'bigint';
  // Foreign keys into other copied tables: remap through that table's id map. A reference into
  // one of the agent's tables that is not copied would point at the parent's row: it is cleared.
  const remap = new Map<string, string>();
  const cleared = new Set<string>();
  for (const fk of cfg.foreignKeys) {
    const ref = fk.reference();
    const target = getTableName(ref.foreignTable);
    if (ref.columns.length !== 1 || ref.foreignColumns[0]?.name !== 'id') continue;
    if (target === 'agents') continue;
    if (copied.has(target)) remap.set(ref.columns[0]!.name, target);
    else if (ownedNames.has(target)) {
      const col = ref.columns[0]!;
      if (col.notNull)
        throw new Error(
          `fork copy: ${name}.${col.name} must reference ${target}, which this copy leaves out; copy ${target} too`,
        );
      cleared.add(col.name);
    }
  }
  // Globally unique text columns (idempotency keys): a copy would collide, so it gets a prefix.
  const prefixed = new Set<string>(cfg.columns.filter((c) => c.isUnique && c.name !== 'id').map((c) => c.name));
  for (const ix of cfg.indexes) {
    if (!ix.config.unique) continue;
    const cols = ix.config.columns.map((c) => (c as { name?: string }).name ?? '');
    if (cols.includes('agent_id') || cols.some((c) => remap.has(c) || cleared.has(c))) continue;
    for (const c of cols) prefixed.add(c);
  }
  for (const c of prefixed) {
    const col = cfg.columns.find((x) => x.name === c);
    if (!col || col.columnType !== 'PgText')
      throw new Error(
        `fork copy: ${name}.${c} is globally unique and not text; teach db/queries/fork-copy.ts how to copy it`,
      );
  }
  const columns = cfg.columns.filter((c) => !c.generated);
  // One join per remapped column: `r_<i>` is the id map of the table that column references.
  const remapped = [...remap.entries()];
  const aliasOf = (col: string) => `r_${remapped.findIndex(([c]) => c === col)}`;
  return {
    name,
    idKind,
    map: ({ parent, prefix }) =>
      idKind === 'bigint'
        ? sql`create temp table ${q(mapName(name))} on commit drop as select id as old_id, nextval(pg_get_serial_sequence(${`"${name}"`}, 'id')) as new_id from ${q(name)} where agent_id = ${parent} order by id`
        : sql`create temp table ${q(mapName(name))} on commit drop as select id as old_id, ${prefix} || id as new_id from ${q(name)} where agent_id = ${parent}`,
    insert: ({ parent, target, prefix }) => {
      const exprs = columns.map((c) => {
        if (c.name === 'id') return sql`m_0.new_id`;
        if (c.name === 'agent_id') return sql`${target}::text`;
        if (cleared.has(c.name)) return sql`null`;
        // A reference to a row of another agent (should not happen) is kept as it is.
        if (remap.has(c.name)) return sql`coalesce(${sql.raw(aliasOf(c.name))}.new_id, s.${q(c.name)})`;
        if (prefixed.has(c.name))
          return sql`case when s.${q(c.name)} is null then null else ${prefix} || s.${q(c.name)} end`;
        return sql`s.${q(c.name)}`;
      });
      const joins = remapped.map(
        ([col, to]) =>
          sql` left join ${q(mapName(to))} ${sql.raw(aliasOf(col))} on ${sql.raw(aliasOf(col))}.old_id = s.${q(col)}`,
      );
      return sql`insert into ${q(name)} (${sql.join(
        columns.map((c) => q(c.name)),
        sql`, `,
      )}) select ${sql.join(exprs, sql`, `)} from ${q(name)} s join ${q(mapName(name))} m_0 on m_0.old_id = s.id${sql.join(joins, sql``)} where s.agent_id = ${parent}`;
    },
  };
}

/** Every table a copy may take (SQL names, in foreign-key order): all the agent's tables but the skipped ones. */
export const copyableTables: readonly string[] = agentOwnedTables
  .filter((t) => !skipped.has(t))
  .map((t) => getTableName(t));

const cachedPlans = new Map<string, TablePlan[]>();
/**
 * The copy plan of `tables` (SQL names; default every copyable table), in foreign-key order
 * (`agentOwnedTables` is ordered so). A name that is not a copyable table is an error.
 */
export function copyPlan(tables: readonly string[] = copyableTables): TablePlan[] {
  const key = [...tables].sort().join(',');
  const cached = cachedPlans.get(key);
  if (cached) return cached;
  const unknown = tables.filter((t) => !copyableTables.includes(t));
  if (unknown.length)
    throw new Error(
      `agent copy: not a table of the agent's state: ${unknown.join(', ')} (copyable: ${copyableTables.join(', ')})`,
    );
  const names = new Set(tables);
  const plan = agentOwnedTables.filter((t) => names.has(getTableName(t))).map((t) => planTable(t, names));
  cachedPlans.set(key, plan);
  return plan;
}

/** Keys of `abstracts.sources` → the table their ids point into. */
const abstractSourceTables: Record<string, string> = {
  responses: 'llm_recent_responses',
  diary: 'diary_entries',
  concepts: 'concepts',
  links: 'links',
  abstracts: 'abstracts',
};

/**
 * Copy `parent`'s rows in `tables` (default every copyable table) to `target` inside `tx` (the
 * target's `agents` row must exist). Returns the number of rows copied per table.
 */
export async function copyAgentState(
  tx: Tx,
  p: CopyTarget & { tables?: readonly string[] },
): Promise<Record<string, number>> {
  const counts: Record<string, number> = {};
  const plan = copyPlan(p.tables);
  for (const t of plan) {
    await tx.execute(t.map(p));
    const r = await tx.execute(t.insert(p));
    counts[t.name] = r.rowCount ?? 0;
  }
  if (!(p.tables ?? copyableTables).includes('abstracts')) return counts;
  // abstracts.sources holds ids of other agent rows in jsonb: remap them as the FKs were (ids of
  // a table this copy left out are kept as they are, like any other id of another agent).
  const union = sql.join(
    Object.entries(abstractSourceTables)
      .filter(([, table]) => plan.some((t) => t.name === table))
      .map(([k, table]) => sql`select ${k}::text as k, old_id, new_id from ${q(mapName(table))}`),
    sql` union all `,
  );
  await tx.execute(sql`
    with m as (${union})
    update abstracts a set sources = (
      select coalesce(jsonb_object_agg(kv.key, case when jsonb_typeof(kv.value) = 'array' then (
        select coalesce(jsonb_agg(coalesce(m.new_id, e.v::bigint) order by e.ord), '[]'::jsonb)
        from jsonb_array_elements_text(kv.value) with ordinality e(v, ord)
        left join m on m.k = kv.key and m.old_id = e.v::bigint) else kv.value end), '{}'::jsonb)
      from jsonb_each(a.sources) kv)
    where a.agent_id = ${p.target} and a.sources <> '{}'::jsonb`);
  return counts;
}

interface ForkCopy {
  /** Rows copied per table. */
  copied: Record<string, number>;
  /** All rows copied. */
  rows: number;
  /** Rows of the fork's scoped copy of the tool registry. */
  toolsCopied: number;
}

/**
 * The fork's isolated copy, inside `tx`: an `agents` row `forkAgentId` (kind `fork`) made from
 * the parent's, every row the parent owns (copyAgentState), and a scoped copy of the global
 * tool registry (`fork_tool_registry`, gone with the fork agent).
 */
export async function createForkCopy(
  tx: Tx,
  p: { parent: Agent; forkId: string; forkAgentId: string },
): Promise<ForkCopy> {
  const { parent, forkId, forkAgentId } = p;
  await tx.insert(agents).values({
    id: forkAgentId,
    name: `${parent.name} (fork ${forkId})`,
    description: `successor fork ${forkId} of ${parent.id}`,
    parentId: parent.id,
    kind: 'fork',
    status: 'created',
    identity: parent.identity,
    lifeforce: parent.lifeforce,
    lastTick: parent.lastTick,
  });
  const copied = await copyAgentState(tx, { parent: parent.id, target: forkAgentId, prefix: `${forkAgentId}:` });
  const rows = Object.values(copied).reduce((a, b) => a + b, 0);
  const tools = await tx.execute(sql`
    insert into ${forkToolRegistry} (agent_id, tool_id, name, version, kind, status, spec, implementation, tests)
    select ${forkAgentId}, id, name, version, kind, status, spec, implementation, tests from ${toolRegistry}`);
  return { copied, rows, toolsCopied: tools.rowCount ?? 0 };
}
