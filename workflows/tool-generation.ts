/**
 * Ouroboros, id `tool/<agentId>/<capability>`: a capability no registered tool has
 * → the LLM writes a tool (module + tests) → static AST safety check → its tests run in the
 * sandbox → registered with its capability, a `generated_tool` learning and the full source
 * kept for audit → the result goes back to whoever asked, so the original intent proceeds.
 * Development mode allows it; production refuses unless an admin override is set. Every way
 * it can end without a tool is a typed reason (core/tool-generation.ts).
 */
import {
  ActivityFailure,
  ApplicationFailure,
  defineSignal,
  getExternalWorkflowHandle,
  log,
  patched,
  proxyActivities,
  upsertSearchAttributes,
  workflowInfo,
} from '@temporalio/workflow';
import type { z } from 'zod';
import type { createSandboxChargeActivities } from '../activities/sandbox-charge.js';
import type { createToolGenerationActivities } from '../activities/tool-generation.js';
import type { SandboxRunRequest, SandboxRunResult } from '../sandbox/sandbox.js';
import { budgetIds } from '../core/lifeforce.js';
import { tailText } from '../core/sanitize.js';
import {
  toolGenerationInput,
  toolResultNote,
  type ToolGenerationInput,
  type ToolGenerationResult,
} from '../core/tool-generation.js';
import { dbActivity, llmActivity, sandboxActivity } from './lib/activity-options.js';
import { parseWorkflowInput } from './lib/input.js';
import { chargedSandboxRun } from './lib/sandbox-charge.js';
import { agentIdSearchAttribute, kindSearchAttribute } from './lib/search-attributes.js';

type Activities = ReturnType<typeof createToolGenerationActivities> & ReturnType<typeof createSandboxChargeActivities>;
/** The sandbox queue's run activity (activities/sandbox.ts). */
interface SandboxActivities {
  sandboxRun(req: SandboxRunRequest): Promise<SandboxRunResult>;
}

const db = proxyActivities<Activities>(dbActivity);
const llm = proxyActivities<Activities>(llmActivity);
// A sandbox run is retried by its own preset only for infrastructure errors; what the code
// inside does comes back as a result, never as a failure.
// No sandbox worker polling for 5 minutes is `sandbox_error`, not an endless wait.
const sandbox = proxyActivities<SandboxActivities>({ ...sandboxActivity, scheduleToStartTimeout: '5 minutes' });

/** `node --test` prints `not ok 1 - <name>` per failing test: name them first in the message. */
function failingTests(stdout: string): string {
  const names = [...stdout.matchAll(/^\s*not ok \d+ - (.+)$/gm)]
    .map((m) => m[1]!.trim())
    .filter((n) => !n.endsWith('.mjs'));
  return names.length
    ? ` in ${names
        .slice(0, 5)
        .map((n) => `'${n}'`)
        .join(', ')}`
    : '';
}

/** Generate, check, test and register a tool for a capability; returns the tool or a typed reason. */
export async function toolGenerationWorkflow(rawInput: ToolGenerationInput): Promise<ToolGenerationResult> {
  const input = parseWorkflowInput('toolGenerationWorkflow', toolGenerationInput, rawInput);
  const info = workflowInfo();
  const key = (step: string) => `${info.workflowId}/${info.runId}/${step}`;
  upsertSearchAttributes([
    { key: agentIdSearchAttribute, value: input.agentId },
    { key: kindSearchAttribute, value: 'tool-generation' },
  ]);
  const result = await generate(input, key);
  // The original intent proceeds: the loop that asked gets a note and is woken to act on it.
  if (input.requestedBy) {
    await db.notifyToolRequester({
      agentId: input.agentId,
      text: toolResultNote(input.capability, result),
      ok: result.ok,
      key: key('notify'),
    });
    try {
      await getExternalWorkflowHandle(input.requestedBy.workflowId).signal(wakeSignal, { reason: 'note' });
    } catch (err) {
      log.info('requesting loop not running; the note waits for it', {
        workflowId: input.requestedBy.workflowId,
        error: String(err),
      });
    }
  }
  return result;
}

/** The `wake` signal of agentLoopWorkflow (by name: this module must not import the loop). */
const wakeSignal = defineSignal<[{ reason: 'note' | 'process' }]>('wake');

async function generate(
  input: z.output<typeof toolGenerationInput>,
  key: (step: string) => string,
): Promise<ToolGenerationResult> {
  const { agentId, capability } = input;
  // 1. Policy: production generates tools only with an explicit admin override (the input's
  // flag, or MINDLOOP_ALLOW_TOOLGEN on the worker).
  // The input may ask for production on a development worker, never the reverse.
  const policy = await db.toolGenerationPolicy();
  const mode = policy.mode === 'production' ? 'production' : (input.mode ?? policy.mode);
  const override = input.adminOverride ? 'admin-override' : policy.allowOverride ? 'MINDLOOP_ALLOW_TOOLGEN' : null;
  const approvedBy = mode === 'production' ? override : null;
  const base = { agentId, capability, mode, approvedBy };

  if (mode === 'production' && !override) {
    const message =
      'tool generation is refused in production mode without an admin override (MINDLOOP_ALLOW_TOOLGEN=1 or adminOverride: true)';
    const { auditId } = await db.recordToolAudit({
      ...base,
      toolName: capability,
      implementation: '',
      outcome: 'rejected_policy',
      testResult: { reason: 'policy_refused', message },
      key: key('policy'),
    });
    return { ok: false, reason: 'policy_refused', message, auditId };
  }

  // 2. The LLM writes it.
  const written = await llm.writeTool({
    agentId,
    capability,
    description: input.description,
    role: input.role,
    key: key('write'),
  });
  if (!written.ok) {
    const { auditId } = await db.recordToolAudit({
      ...base,
      toolName: capability,
      implementation: written.raw,
      outcome: 'error',
      testResult: { reason: 'malformed_reply', message: written.message },
      key: key('audit'),
    });
    return { ok: false, reason: 'malformed_reply', message: written.message, auditId };
  }
  const { tool } = written;

  // 3. Static safety check (AST), of the module and of the tests that will run with it.
  const safety = await db.checkToolSafety({ module: tool.module, tests: tool.tests });
  const safetyCheck = { ok: safety.ok, file: safety.file, violations: safety.violations };
  if (!safety.ok) {
    const message = `unsafe code in ${safety.file}: ${safety.violations.map((v) => `${v.line}:${v.column} ${v.rule}: ${v.message}`).join('; ')}`;
    const { auditId } = await db.recordToolAudit({
      ...base,
      toolName: tool.name,
      implementation: tool.module,
      tests: tool.tests,
      safetyCheck,
      outcome: 'rejected_static',
      key: key('audit'),
    });
    return { ok: false, reason: 'unsafe_code', message, auditId, details: safety.violations };
  }

  // 4. Its tests, in the sandbox (no network, read-only root, budgets).
  let run: SandboxRunResult;
  const testRun = {
    key: key('test'),
    command: ['node', '--test', 'tool.test.mjs'],
    files: { 'tool.mjs': tool.module, 'tool.test.mjs': tool.tests, 'package.json': '{"type":"module"}' },
    budget: { wallMs: input.testTimeoutMs },
  };
  try {
    // sandbox-charge-v1: the tests' run is charged to the agent's budget (held before, settled
    // after); generations begun before ran them uncharged, and replay so.
    run = patched('sandbox-charge-v1')
      ? await chargedSandboxRun(db, sandbox.sandboxRun, testRun, {
          agentId,
          budgetId: budgetIds.agent(agentId),
          reason: `tests of the generated tool ${tool.name}`,
        })
      : await sandbox.sandboxRun(testRun);
  } catch (err) {
    const message = `the sandbox could not run the tests: ${err instanceof ActivityFailure && err.cause ? err.cause.message : String(err)}`;
    log.warn('sandbox unavailable', { agentId, capability, message });
    const { auditId } = await db.recordToolAudit({
      ...base,
      toolName: tool.name,
      implementation: tool.module,
      tests: tool.tests,
      safetyCheck,
      outcome: 'error',
      testResult: { reason: 'sandbox_error', message },
      key: key('audit'),
    });
    return { ok: false, reason: 'sandbox_error', message, auditId };
  }
  const testResult = {
    status: run.status,
    exceeded: run.exceeded ?? null,
    exitCode: run.exitCode,
    durationMs: run.durationMs,
    stdout: tailText(run.stdout, 4000),
    stderr: tailText(run.stderr, 4000),
    truncated: run.truncated,
    imageId: run.imageId,
  };
  if (run.status !== 'ok' || run.exitCode !== 0) {
    const timedOut = run.status === 'budget_exceeded' && run.exceeded === 'wall_time';
    const reason = timedOut ? 'tests_timeout' : 'tests_failed';
    const message = timedOut
      ? `the tests ran past their ${input.testTimeoutMs} ms budget and were killed`
      : run.status === 'budget_exceeded'
        ? `the tests exceeded the sandbox's ${run.exceeded} budget`
        : `the tests failed (exit ${run.exitCode})${failingTests(run.stdout)}: ${tailText(`${run.stdout}\n${run.stderr}`.trim(), 600)}`;
    const { auditId } = await db.recordToolAudit({
      ...base,
      toolName: tool.name,
      implementation: tool.module,
      tests: tool.tests,
      safetyCheck,
      testResult: { ...testResult, reason },
      outcome: 'failed_tests',
      key: key('audit'),
    });
    return { ok: false, reason, message, auditId, details: testResult };
  }

  // 5. Register: catalogue, discovery, learning, audit.
  let registered;
  try {
    registered = await db.registerGeneratedTool({
      agentId,
      capability,
      tool,
      mode,
      approvedBy,
      safetyCheck,
      testResult,
      key: key('audit'),
    });
  } catch (err) {
    if (err instanceof ActivityFailure && err.cause instanceof ApplicationFailure && err.cause.type === 'Forbidden') {
      throw ApplicationFailure.create({ type: 'ToolNameTaken', nonRetryable: true, message: err.cause.message });
    }
    throw err;
  }
  if (registered.learningError)
    log.warn('generated_tool learning not saved', { agentId, tool: tool.name, error: registered.learningError });
  return {
    ok: true,
    tool: {
      id: registered.toolId,
      name: tool.name,
      capability,
      description: tool.description,
      version: registered.version,
    },
    auditId: registered.auditId,
  };
}
