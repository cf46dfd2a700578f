/**
 * Generated tools' rows: the audit of every generation attempt (generated_tools_audit, with the
 * full source) and a tool that passed, in tool_registry and discovered by its agent. Plain table
 * functions; each write is idempotent (keys, upserts), and each takes the pool or a transaction.
 */
import { and, eq, sql } from 'drizzle-orm';
import type { GeneratedTool } from '../../core/tool-generation.js';
import { discoveredTools, generatedToolsAudit, toolRegistry, type GeneratedToolAudit } from '../schema/index.js';
import type { Queryable } from './abstracts.js';

export interface ToolAuditInput {
  agentId: string;
  toolName: string;
  capability: string;
  implementation: string;
  tests?: string | null;
  safetyCheck?: Record<string, unknown>;
  testResult?: Record<string, unknown> | null;
  outcome: GeneratedToolAudit['outcome'];
  mode: string;
  approvedBy?: string | null;
  toolId?: number | null;
  /** Workflow id + run + step. */
  key: string;
}

/** Keep a generation attempt (once per key); returns the audit row's id. */
export async function auditToolGeneration(q: Queryable, input: ToolAuditInput): Promise<number> {
  const [row] = await q
    .insert(generatedToolsAudit)
    .values({
      agentId: input.agentId,
      toolName: input.toolName,
      toolId: input.toolId ?? null,
      intent: input.capability,
      implementation: input.implementation,
      tests: input.tests ?? null,
      safetyCheck: input.safetyCheck ?? {},
      testResult: input.testResult ?? null,
      outcome: input.outcome,
      mode: input.mode,
      approvedBy: input.approvedBy ?? null,
      idempotencyKey: input.key,
    })
    .onConflictDoNothing({ target: generatedToolsAudit.idempotencyKey })
    .returning({ id: generatedToolsAudit.id });
  if (row) return row.id;
  const [found] = await q
    .select({ id: generatedToolsAudit.id })
    .from(generatedToolsAudit)
    .where(eq(generatedToolsAudit.idempotencyKey, input.key));
  return found!.id;
}

/**
 * A generated tool in the registry: inserted, or a new version when the name exists and the
 * code changed (or the tool was not active); a retry with the same code changes nothing. The
 * tool is discovered by its agent (via design). A name that belongs to a tool of another kind
 * is left alone: `takenBy` says its kind.
 */
export async function upsertGeneratedTool(
  q: Queryable,
  input: { agentId: string; capability: string; tool: GeneratedTool },
): Promise<{ toolId: number; version: number } | { takenBy: string }> {
  const { tool } = input;
  const [existing] = await q.select().from(toolRegistry).where(eq(toolRegistry.name, tool.name)).for('update');
  if (existing && existing.kind !== 'generated') return { takenBy: existing.kind };
  let toolId: number;
  let version: number;
  if (!existing) {
    const [row] = await q
      .insert(toolRegistry)
      .values({
        name: tool.name,
        description: tool.description,
        capability: input.capability,
        kind: 'generated',
        implementation: tool.module,
        tests: tool.tests,
        status: 'active',
        createdBy: input.agentId,
        spec: { entry: 'run', runtime: 'node', files: ['tool.mjs', 'tool.test.mjs'] },
      })
      .returning({ id: toolRegistry.id, version: toolRegistry.version });
    [toolId, version] = [row!.id, row!.version];
  } else if (existing.implementation !== tool.module || existing.tests !== tool.tests || existing.status !== 'active') {
    const [row] = await q
      .update(toolRegistry)
      .set({
        description: tool.description,
        capability: input.capability,
        implementation: tool.module,
        tests: tool.tests,
        status: 'active',
        version: sql`${toolRegistry.version} + 1`,
      })
      .where(eq(toolRegistry.id, existing.id))
      .returning({ id: toolRegistry.id, version: toolRegistry.version });
    [toolId, version] = [row!.id, row!.version];
  } else {
    [toolId, version] = [existing.id, existing.version]; // a retry: already registered
  }
  await q.insert(discoveredTools).values({ agentId: input.agentId, toolId, via: 'design' }).onConflictDoNothing();
  return { toolId, version };
}

/** The active tool registered for a capability, or null. */
export async function toolForCapability(
  q: Queryable,
  capability: string,
): Promise<{ id: number; name: string; description: string | null; version: number } | null> {
  const [row] = await q
    .select({
      id: toolRegistry.id,
      name: toolRegistry.name,
      description: toolRegistry.description,
      version: toolRegistry.version,
    })
    .from(toolRegistry)
    .where(and(eq(toolRegistry.capability, capability), eq(toolRegistry.status, 'active')))
    .limit(1);
  return row ?? null;
}
