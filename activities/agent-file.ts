/**
 * Agent files against the database: an agent's live state read back as a document (export, and
 * the "live" side of the three-way comparison), and a file applied — checked, compared with the
 * live agent and the last file applied (`agent_files`), and its changes written in one
 * transaction with the record of who applied it, when, and the diff. A file that is refused
 * (bad, naming a model or peer that does not exist, in conflict with the agent's own changes)
 * writes nothing.
 */
import { and, asc, desc, eq, inArray, max } from 'drizzle-orm';
import {
  agentDocumentSchema,
  canonicalJson,
  checkAgentDocument,
  compareDocuments,
  diffLine,
  differencesToApply,
  fileConfigKeys,
  formatDiff,
  loopSettingsOf,
  type AgentDocument,
  type Comparison,
  type DiffLine,
  type ItemDifference,
  type LoopSettingsPatch,
} from '../core/agent-file/index.js';
import { budgetIds } from '../core/lifeforce.js';
import type { Db } from '../db/client.js';
import { configureBudget, type BudgetConfig } from '../db/queries/lifeforce.js';
import {
  agentConfig,
  agentFiles,
  agentPeers,
  agents,
  ethicsPolicies,
  goals,
  lifeforceBudgets,
  llmRegistry,
  models,
  systemPrompts,
  tasks,
  thinkingMethods,
} from '../db/schema/index.js';
import { assignModel } from '../runtime/models.js';
import {
  mcpItemName,
  probeMcpChanges,
  probeWithWorkerEnv,
  readMcpEntries,
  writeMcpItem,
  type McpProbe,
} from './agent-file-mcp.js';
import { ErrorType, nonRetryable } from './errors.js';
import type { McpListedTool } from './mcp/pool.js';
import type { McpServerEntry } from '../core/mcp-policy.js';
import { defaultLocalModelName } from './llm/registry.js';

type Tx = Parameters<Parameters<Db['transaction']>[0]>[0];
type Conn = Db | Tx;

/** The built-in offline model's catalogue name: a file names it without anyone adding it. */
export const localModelName = 'local';

/** The agent_config key that holds idle mode's switch and wake conditions (its timeout is `idle_timeout_ms`). */
const idleConfigKey = 'idle';

export interface ApplyAgentFileInput {
  /** The agent the file is applied to: must equal the document's `id`. */
  agentId: string;
  /** The document (parsed YAML or JSON, or a workflow input): checked again here. */
  document: unknown;
  /** Who applies it (the CLI's user, `temporal-ui`). */
  appliedBy: string;
  /** Compare and print only; write nothing. */
  dryRun?: boolean;
  /** Take the file's value where both the file and the agent changed an item. */
  overwriteDrift?: boolean;
  /** Where the file came from (a path), for the record. */
  source?: string;
  /** This deployment's id: an agent last applied by another deployment is refused. */
  deployment?: string;
  /** Agent ids applied in the same batch (a folder): known as peers though not in the database yet. */
  batchAgents?: string[];
  /**
   * The caller's key for this apply (the agent loop: its workflow id and the update's id). A
   * retried activity whose first attempt committed returns that attempt's record.
   */
  requestKey?: string;
}

export interface ApplyAgentFileResult {
  agentId: string;
  /** The agent did not exist before this apply (a dry run: would not). */
  created: boolean;
  /** The file changes something (written unless `dryRun`). */
  changed: boolean;
  /** The changes were written (false for a dry run and for a file that changes nothing). */
  applied: boolean;
  /** The changes (with the conflicts overwritten, when asked), one line each. */
  diff: DiffLine[];
  /** The agent's own changes since the last apply: kept. */
  drift: DiffLine[];
  /** Items both the file and the agent changed (refused unless `overwriteDrift`; only a dry run returns them unapplied). */
  conflicts: DiffLine[];
  /** The whole comparison as a person reads it. */
  text: string;
  /** The loop settings the file states, as now in force in the database: the loop puts them in its state. */
  loopSettings: LoopSettingsPatch;
  /** The `agent_files` row recorded (null when nothing was written). */
  fileId: number | null;
}

// ---- reading ------------------------------------------------------------------------------------

const orUndefined = <T>(v: T | null | undefined): T | undefined =>
  v === null || v === undefined || v === '' ? undefined : v;

/** The agent as a document, or null when it does not exist. */
export async function readLiveDocument(q: Conn, agentId: string): Promise<AgentDocument | null> {
  const [agent] = await q.select().from(agents).where(eq(agents.id, agentId));
  if (!agent) return null;
  // One after another: inside a transaction the statements share one connection.
  const prompts = await q
    .select()
    .from(systemPrompts)
    .where(and(eq(systemPrompts.agentId, agentId), eq(systemPrompts.active, true)));
  const methods = await q
    .select()
    .from(thinkingMethods)
    .where(and(eq(thinkingMethods.agentId, agentId), eq(thinkingMethods.active, true)))
    .orderBy(asc(thinkingMethods.id));
  const goalRows = await q.select().from(goals).where(eq(goals.agentId, agentId)).orderBy(asc(goals.id));
  const taskRows = await q
    .select()
    .from(tasks)
    .where(and(eq(tasks.agentId, agentId), eq(tasks.pinned, true)))
    .orderBy(asc(tasks.id));
  const policies = await q
    .select()
    .from(ethicsPolicies)
    .where(and(eq(ethicsPolicies.agentId, agentId), eq(ethicsPolicies.active, true)))
    .orderBy(asc(ethicsPolicies.id));
  const registry = await q
    .select()
    .from(llmRegistry)
    .where(eq(llmRegistry.agentId, agentId))
    .orderBy(asc(llmRegistry.priority), asc(llmRegistry.id));
  const budget = await q
    .select()
    .from(lifeforceBudgets)
    .where(eq(lifeforceBudgets.id, budgetIds.agent(agentId)));
  const config = await q.select().from(agentConfig).where(eq(agentConfig.agentId, agentId));
  const peers = await q.select().from(agentPeers).where(eq(agentPeers.agentId, agentId)).orderBy(asc(agentPeers.id));
  const mcp = await readMcpEntries(q, agentId);
  // Titles key goals, tasks and policies: a second row with a title already seen is not the file's.
  const firstBy = <T>(rows: T[], key: (r: T) => string) =>
    rows.filter((r, i) => rows.findIndex((x) => key(x) === key(r)) === i);
  const goalTitle = new Map(goalRows.map((g) => [g.id, g.title]));
  const cfg = new Map(config.map((c) => [c.key, c.value]));
  const idle = (cfg.get(idleConfigKey) ?? {}) as { on?: unknown; wakeOn?: unknown };
  const models = modelsOf(registry);
  const prompt = (kind: 'short' | 'full') => orUndefined(prompts.find((p) => p.kind === kind)?.content);
  const method = methods[0];
  const raw = {
    id: agent.id,
    name: agent.name,
    description: orUndefined(agent.description),
    identity: {
      persona: typeof agent.identity.persona === 'string' ? orUndefined(agent.identity.persona) : undefined,
      values: Array.isArray(agent.identity.values) && agent.identity.values.length ? agent.identity.values : undefined,
      languages:
        Array.isArray(agent.identity.languages) && agent.identity.languages.length
          ? agent.identity.languages
          : undefined,
    },
    systemPrompt: { short: prompt('short'), full: prompt('full') },
    thinkingMethod: method
      ? { name: method.name, prompt: method.prompt, description: orUndefined(method.description) }
      : null,
    goals: firstBy(goalRows, (g) => g.title).map((g) => ({
      title: g.title,
      description: orUndefined(g.description),
      constraints: orUndefined(g.constraints),
      successCriteria: orUndefined(g.successCriteria),
      priority: g.priority,
      status: g.status,
    })),
    tasks: firstBy(taskRows, (t) => t.title).map((t) => ({
      title: t.title,
      description: orUndefined(t.description),
      priority: t.priority,
      goal: t.goalId === null ? undefined : goalTitle.get(t.goalId),
      status: t.status,
    })),
    ethics: firstBy(policies, (p) => p.title).map((p) => ({
      title: p.title,
      policy: orUndefined(p.rule),
      rationale: orUndefined(p.rationale),
      severity: p.severity,
      scope: p.scope,
      forbids: p.forbids,
      rules: p.rules,
    })),
    models,
    tools: { mcp },
    lifeforce: budget[0]
      ? {
          capacity: budget[0].capacity,
          regenPerHour: budget[0].regenPerHour,
          dailyLimit: budget[0].dailyLimit,
          monthlyLimit: budget[0].monthlyLimit,
          onExhausted: budget[0].onExhausted,
          askFor: budget[0].askFor,
          priority: budget[0].priority,
        }
      : undefined,
    pace: cfg.has('delay_ms') ? { delayMs: cfg.get('delay_ms') } : undefined,
    idle:
      cfg.has('idle_timeout_ms') || cfg.has(idleConfigKey)
        ? { on: idle.on, wakeOn: idle.wakeOn, timeoutMs: cfg.get('idle_timeout_ms') }
        : undefined,
    config: Object.fromEntries(fileConfigKeys.filter((k) => cfg.has(k)).map((k) => [k, cfg.get(k)])),
    peers: peers.map((p) => ({
      id: p.peerAgentId,
      relation: p.relation,
      endpoint: orUndefined(p.endpoint),
      status: p.status,
      notes: orUndefined(p.notes),
    })),
  };
  const parsed = agentDocumentSchema.safeParse(raw);
  // What the agent holds beyond a file's limits (a goal title of 600 characters, say) still reads back.
  return parsed.success ? parsed.data : (raw as unknown as AgentDocument);
}

/** The models of each role by catalogue name, in failover order; the built-in default rows read as `local`. */
function modelsOf(registry: (typeof llmRegistry.$inferSelect)[]): AgentDocument['models'] {
  const nameOf = (r: typeof llmRegistry.$inferSelect) =>
    r.modelName ?? (r.provider === 'local' && r.model === defaultLocalModelName ? localModelName : undefined);
  const out: Record<string, unknown> = {};
  for (const role of ['agent', 'oversight', 'emotion', 'novelty', 'task', 'embedder'] as const) {
    const names = [
      ...new Set(
        registry
          .filter((r) => r.role === role)
          .map(nameOf)
          .filter((n): n is string => n !== undefined),
      ),
    ];
    if (names.length) out[role] = names;
  }
  const validators = registry
    .filter((r) => r.role === 'validator' && nameOf(r) !== undefined)
    .map((r) => ({ model: nameOf(r)!, trust: r.trust }));
  if (validators.length)
    out.validators = validators.filter((v, i) => validators.findIndex((x) => x.model === v.model) === i);
  return out as AgentDocument['models'];
}

/** The document of the last file applied to the agent, and the deployment that applied it. */
async function lastApplied(
  q: Conn,
  agentId: string,
): Promise<{ document: AgentDocument; deployment: string | null } | null> {
  const [row] = await q
    .select({ document: agentFiles.document, deployment: agentFiles.deployment })
    .from(agentFiles)
    .where(eq(agentFiles.agentId, agentId))
    .orderBy(desc(agentFiles.id))
    .limit(1);
  return row ?? null;
}

// ---- checks before writing ----------------------------------------------------------------------

/** Every model and peer the file names must exist; a task's goal must be a goal the agent will have. */
async function checkReferences(q: Conn, doc: AgentDocument, batch: readonly string[]): Promise<string[]> {
  const problems: string[] = [];
  const { validators, ...roles } = doc.models ?? {};
  const named = [...new Set([...Object.values(roles).flat(), ...(validators ?? []).map((v) => v.model)])].filter(
    (n) => n !== localModelName,
  );
  if (named.length) {
    const found = new Set(
      (await q.select({ name: models.name }).from(models).where(inArray(models.name, named))).map((m) => m.name),
    );
    for (const n of named)
      if (!found.has(n))
        problems.push(
          `models: no model '${n}' in the catalogue (\`mindloop models list\` shows them; \`mindloop models add\` adds one; '${localModelName}' is the built-in offline model)`,
        );
  }
  const peers = (doc.peers ?? []).filter((p) => p.endpoint === undefined);
  for (const p of doc.peers ?? []) if (p.id === doc.id) problems.push(`peers: ${p.id} is this agent itself`);
  const unknown = peers.map((p) => p.id).filter((id) => id !== doc.id && !batch.includes(id));
  if (unknown.length) {
    const found = new Set(
      (await q.select({ id: agents.id }).from(agents).where(inArray(agents.id, unknown))).map((a) => a.id),
    );
    for (const id of unknown)
      if (!found.has(id))
        problems.push(
          `peers: no agent '${id}' in this deployment (apply its file first, or give its endpoint when it lives elsewhere)`,
        );
  }
  return problems;
}

// ---- writing ------------------------------------------------------------------------------------

const asDb = (tx: Tx) => tx as unknown as Db; // a transaction runs nested ones as savepoints, so these helpers join it

async function setConfig(tx: Tx, agentId: string, key: string, value: unknown): Promise<void> {
  if (value === undefined) {
    await tx.delete(agentConfig).where(and(eq(agentConfig.agentId, agentId), eq(agentConfig.key, key)));
    return;
  }
  await tx
    .insert(agentConfig)
    .values({ agentId, key, value: value as object, description: 'set by an agent file' })
    .onConflictDoUpdate({
      target: [agentConfig.agentId, agentConfig.key],
      set: { value: value as object, updatedAt: new Date() },
    });
}

/** The catalogue row of the built-in offline model, seeded the first time a file names it. */
async function ensureLocalModel(tx: Tx): Promise<void> {
  await tx
    .insert(models)
    .values({
      name: localModelName,
      provider: 'local',
      model: defaultLocalModelName,
      role: 'agent',
      params: { temperature: 0.7, topP: 0.9, maxTokens: 256 },
    })
    .onConflictDoNothing();
}

async function assignRole(
  tx: Tx,
  agentId: string,
  role: 'agent' | 'oversight' | 'emotion' | 'novelty' | 'task' | 'embedder',
  names: readonly string[] | undefined,
): Promise<void> {
  // The file names the role's models, all of them: rows of the role it does not name go.
  await tx.delete(llmRegistry).where(and(eq(llmRegistry.agentId, agentId), eq(llmRegistry.role, role)));
  for (const [i, modelName] of (names ?? []).entries()) {
    if (modelName === localModelName) await ensureLocalModel(tx);
    await assignModel(asDb(tx), { agentId, role, modelName, priority: (i + 1) * 10 });
  }
}

async function writeValidator(
  tx: Tx,
  agentId: string,
  model: string,
  target: { model: string; trust: number } | undefined,
  order: number,
): Promise<void> {
  const mine = and(eq(llmRegistry.agentId, agentId), eq(llmRegistry.role, 'validator'));
  if (!target) {
    const own =
      model === localModelName
        ? and(mine, eq(llmRegistry.provider, 'local'))
        : and(mine, eq(llmRegistry.modelName, model));
    await tx.delete(llmRegistry).where(own);
    return;
  }
  if (model === localModelName) await ensureLocalModel(tx);
  await assignModel(asDb(tx), {
    agentId,
    role: 'validator',
    modelName: model,
    priority: (order + 1) * 10,
    trust: target.trust,
    validator: true,
  });
}

async function writePrompt(
  tx: Tx,
  agentId: string,
  kind: 'short' | 'full',
  content: string | undefined,
): Promise<void> {
  await tx
    .update(systemPrompts)
    .set({ active: false, updatedAt: new Date() })
    .where(and(eq(systemPrompts.agentId, agentId), eq(systemPrompts.kind, kind), eq(systemPrompts.active, true)));
  if (content === undefined) return;
  const [last] = await tx
    .select({ v: max(systemPrompts.version) })
    .from(systemPrompts)
    .where(and(eq(systemPrompts.agentId, agentId), eq(systemPrompts.kind, kind)));
  await tx.insert(systemPrompts).values({ agentId, kind, content, version: (last?.v ?? 0) + 1, active: true });
}

async function writeThinkingMethod(tx: Tx, agentId: string, method: AgentDocument['thinkingMethod']): Promise<void> {
  await tx
    .update(thinkingMethods)
    .set({ active: false, updatedAt: new Date() })
    .where(and(eq(thinkingMethods.agentId, agentId), eq(thinkingMethods.active, true)));
  if (!method) return;
  const values = { prompt: method.prompt, description: method.description ?? null, active: true, enabled: true };
  await tx
    .insert(thinkingMethods)
    .values({ agentId, name: method.name, ...values })
    .onConflictDoUpdate({
      target: [thinkingMethods.agentId, thinkingMethods.name],
      set: { ...values, updatedAt: new Date() },
    });
}

/** Update the first row with this title, or insert one; or delete every row with the title. */
async function upsertByTitle(
  tx: Tx,
  table: typeof goals | typeof tasks | typeof ethicsPolicies,
  agentId: string,
  title: string,
  values: Record<string, unknown> | undefined,
): Promise<void> {
  const where = and(
    eq(table.agentId, agentId),
    eq(table.title, title),
    table === ethicsPolicies ? eq(ethicsPolicies.active, true) : undefined,
  );
  if (values === undefined) {
    await tx.delete(table).where(where);
    return;
  }
  const [row] = await tx.select({ id: table.id }).from(table).where(where).orderBy(asc(table.id)).limit(1);
  if (row)
    await tx
      .update(table)
      .set({ ...values, updatedAt: new Date() })
      .where(eq(table.id, row.id));
  else await tx.insert(table).values({ agentId, title, ...values } as never);
}

type Entry<K extends keyof AgentDocument> = NonNullable<AgentDocument[K]> extends Array<infer T> ? T : never;

async function writeItem(
  tx: Tx,
  agentId: string,
  d: ItemDifference,
  budget: BudgetConfig,
  idle: Record<string, unknown>,
  listed: ReadonlyMap<string, McpListedTool[]>,
): Promise<void> {
  const m = /^([A-Za-z.]+)(?:\[(".*")\])?$/.exec(d.key);
  const [path, id] = [m?.[1] ?? d.key, m?.[2] === undefined ? undefined : (JSON.parse(m[2]) as string)];
  const v = d.file;
  const [section, field] = path.split('.') as [string, string | undefined];
  switch (section) {
    case 'name':
      await tx
        .update(agents)
        .set({ name: (v as string | undefined) ?? agentId, updatedAt: new Date() })
        .where(eq(agents.id, agentId));
      return;
    case 'description':
      await tx
        .update(agents)
        .set({ description: (v as string | undefined) ?? null, updatedAt: new Date() })
        .where(eq(agents.id, agentId));
      return;
    case 'identity': {
      const [row] = await tx.select({ identity: agents.identity }).from(agents).where(eq(agents.id, agentId));
      const identity = { ...row?.identity, [field!]: v };
      if (v === undefined) delete identity[field!];
      await tx.update(agents).set({ identity, updatedAt: new Date() }).where(eq(agents.id, agentId));
      return;
    }
    case 'systemPrompt':
      return writePrompt(tx, agentId, field as 'short' | 'full', v as string | undefined);
    case 'thinkingMethod':
      return writeThinkingMethod(tx, agentId, v as AgentDocument['thinkingMethod']);
    case 'goals': {
      const g = v as Entry<'goals'> | undefined;
      return upsertByTitle(
        tx,
        goals,
        agentId,
        id!,
        g && {
          description: g.description ?? null,
          constraints: g.constraints ?? null,
          successCriteria: g.successCriteria ?? null,
          priority: g.priority,
          status: g.status,
        },
      );
    }
    case 'tasks': {
      const t = v as Entry<'tasks'> | undefined;
      let goalId: number | null = null;
      if (t?.goal !== undefined) {
        const [goal] = await tx
          .select({ id: goals.id })
          .from(goals)
          .where(and(eq(goals.agentId, agentId), eq(goals.title, t.goal)))
          .orderBy(asc(goals.id))
          .limit(1);
        if (!goal)
          throw nonRetryable(
            ErrorType.InvalidInput,
            `tasks["${t.title}"].goal: the agent has no goal '${t.goal}' (name one of the file's goals)`,
          );
        goalId = goal.id;
      }
      return upsertByTitle(
        tx,
        tasks,
        agentId,
        id!,
        t && { description: t.description ?? null, priority: t.priority, status: t.status, pinned: true, goalId },
      );
    }
    case 'ethics': {
      const e = v as Entry<'ethics'> | undefined;
      return upsertByTitle(
        tx,
        ethicsPolicies,
        agentId,
        id!,
        e && {
          rule: e.policy ?? '',
          rationale: e.rationale ?? null,
          severity: e.severity,
          scope: e.scope,
          forbids: e.forbids,
          rules: e.rules,
          active: true,
        },
      );
    }
    case 'models':
      if (field === 'validators')
        return writeValidator(tx, agentId, id!, v as { model: string; trust: number } | undefined, 0);
      return assignRole(tx, agentId, field as 'agent', v as string[] | undefined);
    case 'lifeforce':
      // Collected and written once, after every other item (one ledger entry for a new capacity).
      (budget as Record<string, unknown>)[field!] = v === undefined ? null : v;
      return;
    case 'pace':
      return setConfig(tx, agentId, 'delay_ms', v);
    case 'idle':
      if (field === 'timeoutMs') return setConfig(tx, agentId, 'idle_timeout_ms', v);
      idle[field!] = v;
      return;
    case 'config':
      return setConfig(tx, agentId, id!, v);
    case 'peers': {
      const p = v as Entry<'peers'> | undefined;
      if (!p) {
        await tx.delete(agentPeers).where(and(eq(agentPeers.agentId, agentId), eq(agentPeers.peerAgentId, id!)));
        return;
      }
      const values = { relation: p.relation, endpoint: p.endpoint ?? null, status: p.status, notes: p.notes ?? null };
      await tx
        .insert(agentPeers)
        .values({ agentId, peerAgentId: p.id, ...values })
        .onConflictDoUpdate({
          target: [agentPeers.agentId, agentPeers.peerAgentId],
          set: { ...values, updatedAt: new Date() },
        });
      return;
    }
    case 'tools': {
      const name = mcpItemName(d.key);
      if (name !== null) return writeMcpItem(tx, agentId, name, v as McpServerEntry | undefined, listed.get(name));
      throw nonRetryable(ErrorType.Unexpected, `agent file: no writer for ${d.key}`);
    }
    default:
      throw nonRetryable(ErrorType.Unexpected, `agent file: no writer for ${d.key}`);
  }
}

/** Validators in the file's order: their priority follows it. */
async function orderValidators(tx: Tx, agentId: string, doc: AgentDocument): Promise<void> {
  for (const [i, v] of (doc.models?.validators ?? []).entries()) {
    const own = v.model === localModelName ? eq(llmRegistry.provider, 'local') : eq(llmRegistry.modelName, v.model);
    await tx
      .update(llmRegistry)
      .set({ priority: (i + 1) * 10 })
      .where(and(eq(llmRegistry.agentId, agentId), eq(llmRegistry.role, 'validator'), own));
  }
}

async function writeDifferences(
  tx: Tx,
  agentId: string,
  doc: AgentDocument,
  list: ItemDifference[],
  listed: ReadonlyMap<string, McpListedTool[]>,
): Promise<void> {
  const budget: BudgetConfig = {};
  const idle: Record<string, unknown> = {};
  for (const d of list) await writeItem(tx, agentId, d, budget, idle, listed);
  if (Object.keys(idle).length) {
    const [row] = await tx
      .select({ value: agentConfig.value })
      .from(agentConfig)
      .where(and(eq(agentConfig.agentId, agentId), eq(agentConfig.key, idleConfigKey)));
    const merged: Record<string, unknown> = { ...(row?.value as Record<string, unknown> | undefined), ...idle };
    for (const [k, v] of Object.entries(merged)) if (v === undefined) delete merged[k];
    await setConfig(tx, agentId, idleConfigKey, Object.keys(merged).length ? merged : undefined);
  }
  if (list.some((d) => d.key === 'models.validators' || d.key.startsWith('models.validators[')))
    await orderValidators(tx, agentId, doc);
  if (Object.keys(budget).length) await configureBudget(asDb(tx), agentId, budget);
}

// ---- the activity -------------------------------------------------------------------------------

const linesOf = (list: ItemDifference[]) => list.map(diffLine);

/** The loop settings the file states, at the values the agent now has (drift kept). */
function settingsInForce(file: AgentDocument, live: AgentDocument | null): LoopSettingsPatch {
  const stated = loopSettingsOf(file);
  const now = live ? loopSettingsOf(live) : {};
  const out: LoopSettingsPatch = {};
  for (const k of Object.keys(stated) as Array<keyof LoopSettingsPatch>)
    if (k !== 'idle') (out as Record<string, unknown>)[k] = now[k] ?? stated[k];
  if (stated.idle)
    out.idle = Object.fromEntries(
      Object.keys(stated.idle).map((k) => [
        k,
        (now.idle as Record<string, unknown> | undefined)?.[k] ?? (stated.idle as Record<string, unknown>)[k],
      ]),
    );
  return out;
}

/** The result of an apply already recorded (a retry of it): its diff as written then. */
function recorded(
  row: typeof agentFiles.$inferSelect,
  file: AgentDocument,
  live: AgentDocument | null,
): ApplyAgentFileResult {
  const written = row.diff.length > 0;
  return {
    agentId: row.agentId,
    created: false,
    changed: written,
    applied: written,
    diff: row.diff,
    drift: [],
    conflicts: [],
    text: written
      ? [`agent ${row.agentId}: changes (${row.diff.length}):`, ...row.diff.map((l) => `  ${l.text}`)].join('\n')
      : `agent ${row.agentId}: nothing to change`,
    loopSettings: settingsInForce(file, live),
    fileId: row.id,
  };
}

/** Check, compare and (unless a dry run) write one agent file. Throws, writing nothing, when it is refused. */
export async function applyAgentFileTo(
  db: Db,
  input: ApplyAgentFileInput,
  opts: { probeMcp?: McpProbe } = {},
): Promise<ApplyAgentFileResult> {
  const checked = checkAgentDocument(input.document);
  if (!checked.ok)
    throw nonRetryable(
      ErrorType.InvalidInput,
      `agent file for ${input.agentId} refused:\n  ${checked.errors.join('\n  ')}`,
      checked.errors,
    );
  const file = checked.document;
  if (file.id !== input.agentId)
    throw nonRetryable(
      ErrorType.InvalidInput,
      `agent file refused: its id is '${file.id}', applied to agent '${input.agentId}'`,
    );
  return db.transaction(async (tx) => {
    if (input.requestKey && !input.dryRun) {
      const [done] = await tx.select().from(agentFiles).where(eq(agentFiles.requestKey, input.requestKey));
      if (done) return recorded(done, file, await readLiveDocument(tx, file.id));
    }
    const problems = await checkReferences(tx, file, input.batchAgents ?? []);
    if (problems.length)
      throw nonRetryable(
        ErrorType.InvalidInput,
        `agent file for ${file.id} refused:\n  ${problems.join('\n  ')}`,
        problems,
      );
    // One apply at a time per agent: the row lock holds a second until this one commits.
    const [existing] = await tx.select({ id: agents.id }).from(agents).where(eq(agents.id, file.id)).for('update');
    const base = await lastApplied(tx, file.id);
    if (base?.deployment && input.deployment && base.deployment !== input.deployment) {
      throw nonRetryable(
        ErrorType.Forbidden,
        `agent ${file.id} belongs to deployment ${base.deployment}, not this one (${input.deployment}): apply its file there`,
      );
    }
    const live = existing ? await readLiveDocument(tx, file.id) : null;
    const comparison: Comparison = compareDocuments({ base: base?.document ?? null, live, file });
    const overwrite = input.overwriteDrift === true;
    const toWrite = differencesToApply(comparison, overwrite);
    const result = (o: {
      applied: boolean;
      fileId: number | null;
      after: AgentDocument | null;
    }): ApplyAgentFileResult => ({
      agentId: file.id,
      created: !existing,
      changed: toWrite.length > 0 || (!overwrite && comparison.conflicts.length > 0),
      applied: o.applied,
      diff: linesOf(toWrite),
      drift: linesOf(comparison.drift),
      conflicts: linesOf(comparison.conflicts),
      text: formatDiff(comparison, file.id, { overwriteDrift: overwrite }),
      loopSettings: settingsInForce(file, o.after),
      fileId: o.fileId,
    });
    if (input.dryRun) return result({ applied: false, fileId: null, after: live });
    if (comparison.conflicts.length > 0 && !overwrite) {
      throw nonRetryable(
        ErrorType.Forbidden,
        `agent file for ${file.id} refused: it changes what the agent changed itself since the last apply (nothing was written).\n${formatDiff(comparison, file.id)}\nPut the agent's values in the file, or pass --overwrite-drift to take the file's.`,
        linesOf(comparison.conflicts),
      );
    }
    const sameFile = base !== null && canonicalJson(base.document) === canonicalJson(file);
    if (toWrite.length === 0 && existing && sameFile) return result({ applied: false, fileId: null, after: live });
    // A server the file adds or reaches differently is started and listed first: one that fails refuses the file.
    const mcp = await probeMcpChanges(toWrite, opts.probeMcp ?? probeWithWorkerEnv);
    if (mcp.problems.length)
      throw nonRetryable(
        ErrorType.InvalidInput,
        `agent file for ${file.id} refused (nothing was written):\n  ${mcp.problems.join('\n  ')}`,
        mcp.problems,
      );
    if (!existing) await tx.insert(agents).values({ id: file.id, name: file.name ?? file.id });
    await writeDifferences(tx, file.id, file, toWrite, mcp.listed);
    // A file that writes nothing but differs from the last one (it took the agent's own changes
    // in, or it is an export) is recorded too: it is the base the next apply compares with.
    const [row] = await tx
      .insert(agentFiles)
      .values({
        agentId: file.id,
        document: file,
        diff: linesOf(toWrite),
        appliedBy: input.appliedBy,
        source: input.source ?? null,
        deployment: input.deployment ?? null,
        requestKey: input.requestKey ?? null,
        overwroteDrift: overwrite && comparison.conflicts.length > 0,
      })
      .returning({ id: agentFiles.id });
    return result({ applied: toWrite.length > 0, fileId: row!.id, after: await readLiveDocument(tx, file.id) });
  });
}

/** The agent-file activities (`applyAgentFile` for the agent loop's update, `exportAgentFile` for the CLI). */
export function createAgentFileActivities({ db, probeMcp }: { db: Db; probeMcp?: McpProbe }) {
  return {
    /** Apply an agent file: validated, compared three ways, written in one transaction and recorded (or only compared: `dryRun`). */
    async applyAgentFile(input: ApplyAgentFileInput): Promise<ApplyAgentFileResult> {
      return applyAgentFileTo(db, input, probeMcp ? { probeMcp } : {});
    },
    /** The agent's live state as an agent document (null when there is no such agent). */
    async exportAgentFile(input: { agentId: string }): Promise<AgentDocument | null> {
      return readLiveDocument(db, input.agentId);
    },
  };
}
