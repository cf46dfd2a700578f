/**
 * Ouroboros activities: the LLM writes a tool, the static safety check reads it,
 * and a tool that passed its sandboxed tests is registered (tool_registry + discovered_tools
 * + a `generated_tool` learning). Every attempt, whatever its outcome, is kept with its full
 * source in generated_tools_audit. The sandbox run itself is `sandboxRun` on the sandbox queue.
 */
import { and, eq, sql } from 'drizzle-orm';
import { Context } from '@temporalio/activity';
import { checkToolSource, type SafetyReport } from '../core/tool-safety.js';
import { generatedToolJsonSchema, parseGeneratedTool, toolPrompt, type GeneratedTool, type ToolMode } from '../core/tool-generation.js';
import type { Db } from '../db/client.js';
import { discoveredTools, generatedToolsAudit, notes, toolRegistry, type GeneratedToolAudit } from '../db/schema/index.js';
import { ErrorType, nonRetryable } from './errors.js';
import type { LearningSink } from './learning-sink.js';
import type { LlmRouter } from './llm/index.js';

export interface ToolGenerationDeps {
  db: Db;
  llm?: LlmRouter;
  learn?: LearningSink;
  /** MINDLOOP_MODE / MINDLOOP_ALLOW_TOOLGEN from env.ts; unset = production without override (fail closed). */
  policy?: { mode: ToolMode; allowOverride: boolean };
}

export type ToolSafetyResult = SafetyReport & { file: 'tool.mjs' | 'tool.test.mjs' | null };

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

/** Ouroboros activities for the `mindloop` queue. */
export function createToolGenerationActivities(deps: ToolGenerationDeps) {
  const { db } = deps;

  async function audit(tx: Db | Parameters<Parameters<Db['transaction']>[0]>[0], input: ToolAuditInput): Promise<number> {
    const [row] = await tx
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
    const [found] = await tx.select({ id: generatedToolsAudit.id }).from(generatedToolsAudit).where(eq(generatedToolsAudit.idempotencyKey, input.key));
    return found!.id;
  }

  return {
    /** This worker's tool-generation policy (workflows never read env; they ask). */
    async toolGenerationPolicy(): Promise<{ mode: ToolMode; allowOverride: boolean }> {
      return deps.policy ?? { mode: 'production', allowOverride: false };
    },

    /** Ask the LLM for the tool (module + tests) as one JSON object; a malformed answer is a typed result, not a retry. */
    async writeTool(input: { agentId: string; capability: string; description: string; role: 'agent' | 'oversight' | 'task'; key: string }): Promise<{ ok: true; tool: GeneratedTool; model: string } | { ok: false; message: string; raw: string }> {
      if (!deps.llm) throw nonRetryable(ErrorType.Unavailable, 'writeTool: no LLM router on this worker');
      let ctx: Context | undefined;
      try {
        ctx = Context.current();
      } catch {
        ctx = undefined;
      }
      const beat = ctx ? setInterval(() => ctx.heartbeat({ waitingFor: 'llm' }), 2_000) : undefined;
      try {
        const r = await deps.llm.chat({
          agentId: input.agentId,
          role: input.role,
          messages: [{ role: 'user', content: toolPrompt(input.capability, input.description) }],
          params: { jsonSchema: generatedToolJsonSchema as unknown as Record<string, unknown>, temperature: 0.2 },
          idempotencyKey: input.key,
          purpose: 'tool_generation',
          signal: ctx?.cancellationSignal,
        });
        const parsed = parseGeneratedTool(r.text);
        return parsed.ok ? { ok: true, tool: parsed.tool, model: `${r.provider}:${r.model}` } : { ok: false, message: parsed.message, raw: r.text.slice(0, 64_000) };
      } finally {
        clearInterval(beat);
      }
    },

    /** The AST safety check of the module and of its tests (the tests run in the sandbox too). */
    async checkToolSafety(input: { module: string; tests: string }): Promise<ToolSafetyResult> {
      const mod = checkToolSource(input.module);
      if (!mod.ok) return { ...mod, file: 'tool.mjs' };
      const tests = checkToolSource(input.tests);
      if (!tests.ok) return { ...tests, file: 'tool.test.mjs' };
      return { ok: true, violations: [], file: null };
    },

    /** Keep a generation attempt that produced no tool (refused, unsafe, failing tests…). */
    async recordToolAudit(input: ToolAuditInput): Promise<{ auditId: number }> {
      return { auditId: await audit(db, input) };
    },

    /**
     * Register a tool that passed: tool_registry (a new version when the name exists and the
     * code changed), discovered by its agent, the audit row, then the `generated_tool` learning.
     */
    async registerGeneratedTool(input: {
      agentId: string;
      capability: string;
      tool: GeneratedTool;
      mode: string;
      approvedBy?: string | null;
      safetyCheck: Record<string, unknown>;
      testResult: Record<string, unknown>;
      key: string;
    }): Promise<{ toolId: number; version: number; auditId: number; learningId: number | null; learningError?: string }> {
      const { tool } = input;
      const registered = await db.transaction(async (tx) => {
        const [existing] = await tx.select().from(toolRegistry).where(eq(toolRegistry.name, tool.name)).for('update');
        if (existing && existing.kind !== 'generated') {
          throw nonRetryable(ErrorType.Forbidden, `tool name '${tool.name}' belongs to a ${existing.kind} tool; a generated tool may not replace it`);
        }
        let toolId: number;
        let version: number;
        if (!existing) {
          const [row] = await tx
            .insert(toolRegistry)
            .values({ name: tool.name, description: tool.description, capability: input.capability, kind: 'generated', implementation: tool.module, tests: tool.tests, status: 'active', createdBy: input.agentId, spec: { entry: 'run', runtime: 'node', files: ['tool.mjs', 'tool.test.mjs'] } })
            .returning({ id: toolRegistry.id, version: toolRegistry.version });
          [toolId, version] = [row!.id, row!.version];
        } else if (existing.implementation !== tool.module || existing.tests !== tool.tests || existing.status !== 'active') {
          const [row] = await tx
            .update(toolRegistry)
            .set({ description: tool.description, capability: input.capability, implementation: tool.module, tests: tool.tests, status: 'active', version: sql`${toolRegistry.version} + 1` })
            .where(eq(toolRegistry.id, existing.id))
            .returning({ id: toolRegistry.id, version: toolRegistry.version });
          [toolId, version] = [row!.id, row!.version];
        } else {
          [toolId, version] = [existing.id, existing.version]; // a retry: already registered
        }
        await tx.insert(discoveredTools).values({ agentId: input.agentId, toolId, via: 'design' }).onConflictDoNothing();
        const auditId = await audit(tx, {
          agentId: input.agentId,
          toolName: tool.name,
          capability: input.capability,
          implementation: tool.module,
          tests: tool.tests,
          safetyCheck: input.safetyCheck,
          testResult: input.testResult,
          outcome: 'registered',
          mode: input.mode,
          approvedBy: input.approvedBy,
          toolId,
          key: input.key,
        });
        return { toolId, version, auditId };
      });
      if (!deps.learn) return { ...registered, learningId: null, learningError: 'no learning store wired on this worker' };
      try {
        const l = await deps.learn({ agentId: input.agentId, shardType: 'tools', predicate: 'generated_tool', args: { name: tool.name, capability: input.capability }, source: `tool/${input.agentId}/${tool.name}` });
        return { ...registered, learningId: l.id };
      } catch (err) {
        // The tool stays registered; a refused learning (rate limit, guard) is reported, not fatal.
        return { ...registered, learningId: null, learningError: (err as Error).message };
      }
    },

    /** Tell the agent that asked how the generation ended: an incoming note (idempotent on its key). */
    async notifyToolRequester(input: { agentId: string; text: string; ok: boolean; key: string }): Promise<{ noteId: number }> {
      const inserted = await db
        .insert(notes)
        .values({ agentId: input.agentId, direction: 'in', source: 'system', sender: 'ouroboros', priority: input.ok ? 5 : 3, tags: ['tool', input.ok ? 'tool_ready' : 'tool_failed'], text: input.text, idempotencyKey: input.key })
        .onConflictDoNothing({ target: notes.idempotencyKey })
        .returning({ id: notes.id });
      const id = inserted[0]?.id ?? (await db.select({ id: notes.id }).from(notes).where(eq(notes.idempotencyKey, input.key)))[0]?.id;
      return { noteId: id! };
    },

    /** Tools already registered for a capability (so a request for one that exists reuses it). */
    async findToolForCapability(input: { agentId: string; capability: string }): Promise<{ id: number; name: string; description: string | null; version: number } | null> {
      const [row] = await db
        .select({ id: toolRegistry.id, name: toolRegistry.name, description: toolRegistry.description, version: toolRegistry.version })
        .from(toolRegistry)
        .where(and(eq(toolRegistry.capability, input.capability), eq(toolRegistry.status, 'active')))
        .limit(1);
      return row ?? null;
    },
  };
}
