/**
 * The escalation's rows: escalations, decision_log, partnership_messages, the tools an
 * escalation grants (discovered_tools) and a designed tool's registry row. Each write is
 * idempotent (keys, upserts, conflict-free inserts), so a retried activity repeats nothing.
 * Each takes the pool's handle or a transaction.
 */
import { and, eq, inArray, isNull, like, or, sql } from 'drizzle-orm';
import { grantAfterEscalations, type EscalationCategory, type ToolDesign } from '../../core/escalation.js';
import type { Decider, HumanVerdict, Outcome } from '../../core/escalation-rules.js';
import {
  decisionLog,
  discoveredTools,
  escalations,
  mcpServers,
  mcpTools,
  partnershipMessages,
  toolRegistry,
} from '../schema/index.js';
import type { Queryable } from './abstracts.js';

/** One message of the agent ↔ oversight ↔ human conversation, written once per key. */
export async function addPartnershipMessage(
  q: Queryable,
  m: typeof partnershipMessages.$inferInsert & { idempotencyKey: string },
): Promise<void> {
  await q.insert(partnershipMessages).values(m).onConflictDoNothing({ target: partnershipMessages.idempotencyKey });
}

/** Names of the catalogue's active tools. */
export async function activeToolNames(q: Queryable): Promise<string[]> {
  return (await q.select({ name: toolRegistry.name }).from(toolRegistry).where(eq(toolRegistry.status, 'active'))).map(
    (r) => r.name,
  );
}

/** The agent an escalation belongs to, or undefined when there is none. */
export async function escalationOwner(q: Queryable, escalationId: string): Promise<string | undefined> {
  const [existing] = await q
    .select({ agentId: escalations.agentId })
    .from(escalations)
    .where(eq(escalations.id, escalationId));
  return existing?.agentId;
}

/** The status an escalation ends in: a denial by default (no one answered) timed out. */
const escalationStatusOf = (outcome: Outcome, decidedBy: Decider) =>
  outcome === 'denied' ? (decidedBy === 'default' ? 'timed_out' : 'rejected') : 'resolved';

interface DesignedToolInput {
  agentId: string;
  escalationId: string;
  design: ToolDesign;
  rounds: number;
}

/**
 * The registry row of a designed tool: inserted, or the next version when the code changed
 * (a retry with the same code changes nothing); the tool is discovered by its agent (via
 * design). A name that belongs to a tool of another kind is left alone: `takenBy` says its kind.
 */
export async function upsertDesignedTool(
  q: Queryable,
  input: DesignedToolInput,
): Promise<{ toolId: number; version: number } | { takenBy: string }> {
  const { spec } = input.design;
  const [existing] = await q.select().from(toolRegistry).where(eq(toolRegistry.name, spec.name)).for('update');
  if (existing && existing.kind !== 'designed') return { takenBy: existing.kind };
  const values = {
    description: spec.description,
    capability: `state_machine.${spec.name}`,
    implementation: input.design.implementation,
    tests: input.design.tests,
    status: 'active' as const,
    spec: {
      states: Object.keys(spec.states),
      initial: spec.initial,
      transitions: Object.fromEntries(Object.entries(spec.states).map(([st, d]) => [st, Object.keys(d.actions)])),
      machine: spec,
      design: { rounds: input.rounds, firstTry: input.rounds === 1, escalationId: input.escalationId },
    },
  };
  let row: { id: number; version: number } | undefined;
  if (!existing) {
    [row] = await q
      .insert(toolRegistry)
      .values({ name: spec.name, kind: 'designed', createdBy: 'oversight', ...values })
      .returning({ id: toolRegistry.id, version: toolRegistry.version });
  } else if (existing.implementation !== input.design.implementation || existing.tests !== input.design.tests) {
    [row] = await q
      .update(toolRegistry)
      .set({ ...values, version: sql`${toolRegistry.version} + 1` })
      .where(eq(toolRegistry.id, existing.id))
      .returning({ id: toolRegistry.id, version: toolRegistry.version });
  } else row = { id: existing.id, version: existing.version }; // a retry
  await q
    .insert(discoveredTools)
    .values({ agentId: input.agentId, toolId: row!.id, via: 'design', escalationId: input.escalationId })
    .onConflictDoNothing();
  return { toolId: row!.id, version: row!.version };
}

/**
 * The tools an answered escalation grants: the recommended ones that exist and are active,
 * plus, once the agent escalated the category `grantAfterEscalations` times, the category's
 * tools. Each becomes discovered by the agent (once). Returns the names newly discovered and,
 * when the category's tools were added, why.
 */
export async function grantEscalationTools(
  q: Queryable,
  input: { agentId: string; escalationId: string; category: EscalationCategory; recommended: string[] },
): Promise<{ newly: string[]; grantReason: string }> {
  const { agentId, category } = input;
  const grants: Array<{ id: number; name: string }> = [];
  let grantReason = '';
  if (input.recommended.length) {
    grants.push(
      ...(await q
        .select({ id: toolRegistry.id, name: toolRegistry.name })
        .from(toolRegistry)
        .where(and(inArray(toolRegistry.name, input.recommended), eq(toolRegistry.status, 'active')))),
    );
  }
  const [{ n } = { n: 0 }] = await q
    .select({ n: sql<number>`count(*)::int` })
    .from(escalations)
    .where(and(eq(escalations.agentId, agentId), eq(escalations.category, category)));
  if (n >= grantAfterEscalations) {
    const byCategory = await q
      .select({ id: toolRegistry.id, name: toolRegistry.name })
      .from(toolRegistry)
      .where(
        and(
          eq(toolRegistry.status, 'active'),
          or(eq(toolRegistry.capability, category), like(toolRegistry.capability, `${category}.%`)),
        ),
      );
    const fresh = byCategory.filter((t) => !grants.some((g) => g.id === t.id));
    if (fresh.length)
      grantReason = `you escalated ${category} ${n} times: granting ${fresh.map((t) => t.name).join(', ')}`;
    grants.push(...fresh);
  }
  const newly: string[] = [];
  // A recommended `server.tool` of the agent's MCP servers is put in its context.
  const mcpNames = input.recommended.filter((n) => n.includes('.'));
  if (mcpNames.length) {
    const found = await q
      .update(mcpTools)
      .set({ discoveredAt: sql`now()`, updatedAt: sql`now()` })
      .from(mcpServers)
      .where(
        and(
          eq(mcpServers.id, mcpTools.serverId),
          eq(mcpTools.agentId, agentId),
          isNull(mcpTools.discoveredAt),
          inArray(sql`${mcpServers.name} || '.' || ${mcpTools.name}`, mcpNames),
        ),
      )
      .returning({ server: mcpServers.name, tool: mcpTools.name });
    newly.push(...found.map((t) => `${t.server}.${t.tool}`));
  }
  for (const t of grants) {
    const [row] = await q
      .insert(discoveredTools)
      .values({ agentId, toolId: t.id, via: 'escalation', escalationId: input.escalationId })
      .onConflictDoNothing()
      .returning({ id: discoveredTools.id });
    if (row) newly.push(t.name);
  }
  return { newly, grantReason };
}

/**
 * Close the escalation and its decision_log row. The granted list of a first close is kept by
 * a retry. Returns the list kept and whether this was the first close.
 */
export async function closeEscalation(
  q: Queryable,
  input: {
    escalationId: string;
    outcome: Outcome;
    decidedBy: Decider;
    newlyGranted: string[];
    decisionOutcome: 'executed' | 'blocked' | 'failed';
    human: { verdict: HumanVerdict; comment?: string } | null;
  },
): Promise<{ grantedTools: string[]; firstFinish: boolean }> {
  const { escalationId } = input;
  const [prior] = await q
    .select({ grantedTools: escalations.grantedTools, resolvedAt: escalations.resolvedAt })
    .from(escalations)
    .where(eq(escalations.id, escalationId));
  const grantedTools = prior?.grantedTools.length ? prior.grantedTools : input.newlyGranted;
  await q
    .update(escalations)
    .set({
      status: escalationStatusOf(input.outcome, input.decidedBy),
      decidedBy: input.decidedBy,
      grantedTools,
      resolvedAt: new Date(),
    })
    .where(eq(escalations.id, escalationId));
  await q
    .update(decisionLog)
    .set({
      outcome: input.decisionOutcome,
      ...(input.human ? { humanAnswer: input.human.verdict, humanComment: input.human.comment ?? null } : {}),
    })
    .where(eq(decisionLog.escalationId, escalationId));
  return { grantedTools, firstFinish: !prior?.resolvedAt };
}

/** A learning moment the learning store refused, kept in the escalation's decision_log row (once). */
export async function keepLearningMoment(q: Queryable, escalationId: string, text: string): Promise<void> {
  await q
    .update(decisionLog)
    .set({ oversightComment: sql`coalesce(${decisionLog.oversightComment}, '') || ${`\n[learning moment] ${text}`}` })
    .where(
      and(
        eq(decisionLog.escalationId, escalationId),
        sql`position('[learning moment]' in coalesce(${decisionLog.oversightComment}, '')) = 0`,
      ),
    );
}
