/**
 * Ouroboros activities: the LLM writes a tool, the static safety check reads it,
 * and a tool that passed its sandboxed tests is registered (tool_registry + discovered_tools
 * + a `generated_tool` learning). Every attempt, whatever its outcome, is kept with its full
 * source in generated_tools_audit. The sandbox run itself is `sandboxRun` on the sandbox queue.
 */
import { checkToolSource, type SafetyReport } from '../core/tool-safety.js';
import {
  generatedToolJsonSchema,
  parseGeneratedTool,
  toolPrompt,
  type GeneratedTool,
  type ToolMode,
} from '../core/tool-generation.js';
import type { Db } from '../db/client.js';
import {
  auditToolGeneration,
  toolForCapability,
  upsertGeneratedTool,
  type ToolAuditInput,
} from '../db/queries/generated-tools.js';
import { addNoteOnce } from '../db/queries/notes.js';
import { bindActivities } from './bind.js';
import { ErrorType, nonRetryable } from './errors.js';
import { withHeartbeat } from './heartbeat.js';
import type { LearningSink } from './learning-sink.js';
import type { LlmRouter } from './llm/index.js';

export type { ToolAuditInput } from '../db/queries/generated-tools.js';

export interface ToolGenerationDeps {
  db: Db;
  llm?: LlmRouter;
  learn?: LearningSink;
  /** MINDLOOP_MODE / MINDLOOP_ALLOW_TOOLGEN from env.ts; unset = production without override (fail closed). */
  policy?: { mode: ToolMode; allowOverride: boolean };
}

type ToolSafetyResult = SafetyReport & { file: 'tool.mjs' | 'tool.test.mjs' | null };

interface RegisterGeneratedToolInput {
  agentId: string;
  capability: string;
  tool: GeneratedTool;
  mode: string;
  approvedBy?: string | null;
  safetyCheck: Record<string, unknown>;
  testResult: Record<string, unknown>;
  key: string;
}

/** This worker's tool-generation policy (workflows never read env; they ask). */
async function toolGenerationPolicy(deps: ToolGenerationDeps): Promise<{ mode: ToolMode; allowOverride: boolean }> {
  return deps.policy ?? { mode: 'production', allowOverride: false };
}

/** Ask the LLM for the tool (module + tests) as one JSON object; a malformed answer is a typed result, not a retry. */
async function writeTool(
  deps: ToolGenerationDeps,
  input: {
    agentId: string;
    capability: string;
    description: string;
    role: 'agent' | 'oversight' | 'task';
    key: string;
  },
): Promise<{ ok: true; tool: GeneratedTool; model: string } | { ok: false; message: string; raw: string }> {
  const llm = deps.llm;
  if (!llm) throw nonRetryable(ErrorType.Unavailable, 'writeTool: no LLM router on this worker');
  return withHeartbeat(
    async (signal) => {
      const r = await llm.chat({
        agentId: input.agentId,
        role: input.role,
        messages: [{ role: 'user', content: toolPrompt(input.capability, input.description) }],
        params: { jsonSchema: generatedToolJsonSchema as unknown as Record<string, unknown>, temperature: 0.2 },
        idempotencyKey: input.key,
        purpose: 'tool_generation',
        signal,
      });
      const parsed = parseGeneratedTool(r.text);
      return parsed.ok
        ? { ok: true as const, tool: parsed.tool, model: `${r.provider}:${r.model}` }
        : { ok: false as const, message: parsed.message, raw: r.text.slice(0, 64_000) };
    },
    { details: { waitingFor: 'llm' } },
  );
}

/** The AST safety check of the module and of its tests (the tests run in the sandbox too). */
async function checkToolSafety(
  _deps: ToolGenerationDeps,
  input: { module: string; tests: string },
): Promise<ToolSafetyResult> {
  const mod = checkToolSource(input.module);
  if (!mod.ok) return { ...mod, file: 'tool.mjs' };
  const tests = checkToolSource(input.tests);
  if (!tests.ok) return { ...tests, file: 'tool.test.mjs' };
  return { ok: true, violations: [], file: null };
}

/** Keep a generation attempt that produced no tool (refused, unsafe, failing tests…). */
async function recordToolAudit(deps: ToolGenerationDeps, input: ToolAuditInput): Promise<{ auditId: number }> {
  return { auditId: await auditToolGeneration(deps.db, input) };
}

/**
 * Register a tool that passed: tool_registry (a new version when the name exists and the
 * code changed), discovered by its agent, the audit row, then the `generated_tool` learning.
 */
async function registerGeneratedTool(
  deps: ToolGenerationDeps,
  input: RegisterGeneratedToolInput,
): Promise<{ toolId: number; version: number; auditId: number; learningId: number | null; learningError?: string }> {
  const { tool } = input;
  const registered = await deps.db.transaction(async (tx) => {
    const r = await upsertGeneratedTool(tx, input);
    if ('takenBy' in r)
      throw nonRetryable(
        ErrorType.Forbidden,
        `tool name '${tool.name}' belongs to a ${r.takenBy} tool; a generated tool may not replace it`,
      );
    const auditId = await auditToolGeneration(tx, {
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
      toolId: r.toolId,
      key: input.key,
    });
    return { ...r, auditId };
  });
  if (!deps.learn) return { ...registered, learningId: null, learningError: 'no learning store wired on this worker' };
  try {
    const l = await deps.learn({
      agentId: input.agentId,
      shardType: 'tools',
      predicate: 'generated_tool',
      args: { name: tool.name, capability: input.capability },
      source: `tool/${input.agentId}/${tool.name}`,
    });
    return { ...registered, learningId: l.id };
  } catch (err) {
    // The tool stays registered; a refused learning (rate limit, guard) is reported, not fatal.
    return { ...registered, learningId: null, learningError: (err as Error).message };
  }
}

/** Tell the agent that asked how the generation ended: an incoming note (idempotent on its key). */
async function notifyToolRequester(
  deps: ToolGenerationDeps,
  input: { agentId: string; text: string; ok: boolean; key: string },
): Promise<{ noteId: number }> {
  const noteId = await addNoteOnce(deps.db, {
    agentId: input.agentId,
    direction: 'in',
    source: 'system',
    sender: 'ouroboros',
    priority: input.ok ? 5 : 3,
    tags: ['tool', input.ok ? 'tool_ready' : 'tool_failed'],
    text: input.text,
    idempotencyKey: input.key,
  });
  return { noteId };
}

/** Tools already registered for a capability (so a request for one that exists reuses it). */
async function findToolForCapability(
  deps: ToolGenerationDeps,
  input: { agentId: string; capability: string },
): Promise<{ id: number; name: string; description: string | null; version: number } | null> {
  return toolForCapability(deps.db, input.capability);
}

/** Ouroboros activities for the `mindloop` queue. */
export function createToolGenerationActivities(deps: ToolGenerationDeps) {
  return bindActivities(deps, {
    toolGenerationPolicy,
    writeTool,
    checkToolSafety,
    recordToolAudit,
    registerGeneratedTool,
    notifyToolRequester,
    findToolForCapability,
  });
}
