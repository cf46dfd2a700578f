/**
 * toolGenerationWorkflow on the time-skipping server. The LLM and the database are typed
 * fakes; the safety check is the real one (core/tool-safety.ts) and the tests really run
 * (`node --test`) through a process-level stand-in for the sandbox on the `sandbox` queue.
 * Each way to end is checked: registered, policy_refused (production) and the override,
 * malformed_reply, unsafe_code (module and tests), tests_failed, tests_timeout,
 * sandbox_error, bad input. (Postgres + router: test/integration/tool-generation.test.ts.)
 */
import { WorkflowFailedError } from '@temporalio/client';
import { ApplicationFailure } from '@temporalio/common';
import { describe, expect, it } from 'vitest';
import { unlimitedLifeforce } from '../helpers/scripted.js';
import type { ToolAuditInput, createToolGenerationActivities } from '../../activities/tool-generation.js';
import type { GeneratedTool, ToolGenerationInput, ToolGenerationResult } from '../../core/tool-generation.js';
import { checkToolSource } from '../../core/tool-safety.js';
import type { SandboxRunRequest } from '../../sandbox/sandbox.js';
import type { ParsedCommand } from '../../core/loop-types.js';
import type { createActivities } from '../../activities/index.js';
import type { createLifeforceActivities } from '../../activities/lifeforce.js';
import type { AgentStatus } from '../../workflows/agent-loop/index.js';
import type { toolGenerationWorkflow } from '../../workflows/tool-generation.js';
import { wordFreqTool } from '../fixtures/tools/word-frequencies.js';
import { startLoop, withWorker } from '../helpers/harness.js';
import { LocalProcessSandbox } from '../helpers/local-sandbox.js';
import { timeSkippingSuite } from '../helpers/temporal.js';

type Activities = ReturnType<typeof createToolGenerationActivities> &
  Pick<ReturnType<typeof createLifeforceActivities>, 'holdSandboxRun' | 'settleSandboxRun'>;

const suite = timeSkippingSuite();

interface Fake {
  notified: Array<{ agentId: string; text: string; ok: boolean }>;
  writes: number;
  audits: ToolAuditInput[];
  registered: Array<{ name: string; mode: string; approvedBy?: string | null }>;
  sandboxRuns: SandboxRunRequest[];
  /** The sandbox run and its charge, in order: `hold <budget> <wall ms>`, `run`, `settle ran|not run`. */
  charge: string[];
  activities: Activities;
}

function fakes(
  reply: GeneratedTool | string,
  policy: { mode: 'development' | 'production'; allowOverride: boolean } = {
    mode: 'development',
    allowOverride: false,
  },
): Fake {
  const f: Fake = {
    notified: [],
    writes: 0,
    audits: [],
    registered: [],
    sandboxRuns: [],
    charge: [],
    activities: {} as Activities,
  };
  f.activities = {
    async toolGenerationPolicy() {
      return policy;
    },
    async writeTool() {
      f.writes++;
      if (typeof reply === 'string')
        return { ok: false as const, message: `the answer is not JSON: ${reply.slice(0, 40)}`, raw: reply };
      return { ok: true as const, tool: reply, model: 'scripted:fake' };
    },
    async checkToolSafety(input) {
      const mod = checkToolSource(input.module);
      if (!mod.ok) return { ...mod, file: 'tool.mjs' as const };
      const tests = checkToolSource(input.tests);
      return tests.ok ? { ok: true, violations: [], file: null } : { ...tests, file: 'tool.test.mjs' as const };
    },
    async recordToolAudit(input) {
      f.audits.push(input);
      return { auditId: f.audits.length };
    },
    async registerGeneratedTool(input) {
      f.registered.push({ name: input.tool.name, mode: input.mode, approvedBy: input.approvedBy });
      f.audits.push({
        agentId: input.agentId,
        toolName: input.tool.name,
        capability: input.capability,
        implementation: input.tool.module,
        outcome: 'registered',
        mode: input.mode,
        key: input.key,
      });
      return { toolId: 42, version: 1, auditId: f.audits.length, learningId: 7 };
    },
    async findToolForCapability() {
      return null;
    },
    async notifyToolRequester(input) {
      f.notified.push({ agentId: input.agentId, text: input.text, ok: input.ok });
      return { noteId: f.notified.length };
    },
    async holdSandboxRun(input) {
      f.charge.push(`hold ${input.budgetId} ${input.wallMs}`);
      return { held: input.wallMs / 1000, replayed: false };
    },
    async settleSandboxRun(input) {
      f.charge.push(`settle ${input.ran ? 'ran' : 'not run'}`);
      return { charged: input.ran ? input.ran.durationMs / 1000 : 0, replayed: false };
    },
  };
  return f;
}

let seq = 0;
async function generate(
  f: Fake,
  input: Omit<ToolGenerationInput, 'agentId'> & { agentId?: string },
  opts: { sandboxDown?: boolean } = {},
): Promise<ToolGenerationResult> {
  const taskQueue = `toolgen-${++seq}`;
  const sandbox = new LocalProcessSandbox();
  const sandboxActivities = {
    async sandboxRun(req: SandboxRunRequest) {
      f.sandboxRuns.push(req);
      f.charge.push('run');
      if (opts.sandboxDown)
        throw ApplicationFailure.nonRetryable('docker: connect ENOENT /var/run/docker.sock', 'Unavailable');
      return sandbox.run(req);
    },
  };
  const workers = [
    { taskQueue, workflowBundle: suite.bundle, activities: f.activities },
    { taskQueue: 'sandbox', activities: sandboxActivities },
  ];
  return withWorker(suite.env, workers, () =>
    suite.env.client.workflow.execute<typeof toolGenerationWorkflow>('toolGenerationWorkflow', {
      taskQueue,
      workflowId: `tool/ada/${input.capability}-${seq}`,
      args: [{ agentId: 'ada', ...input }],
    }),
  );
}

const ask = { capability: 'text.word_frequencies', description: 'count words in a text' };

describe('toolGenerationWorkflow (time-skipping; real safety check, tests really run)', () => {
  it('development mode: writes, checks, tests in the sandbox and registers the tool', async () => {
    const f = fakes(wordFreqTool);
    const r = await generate(f, { ...ask, mode: 'development' });
    expect(r).toEqual({
      ok: true,
      tool: {
        id: 42,
        name: 'word_frequencies',
        capability: 'text.word_frequencies',
        description: wordFreqTool.description,
        version: 1,
      },
      auditId: 1,
    });
    expect(f.sandboxRuns).toHaveLength(1);
    expect(f.sandboxRuns[0]).toMatchObject({
      command: ['node', '--test', 'tool.test.mjs'],
      files: { 'tool.mjs': wordFreqTool.module, 'tool.test.mjs': wordFreqTool.tests },
      budget: { wallMs: 60_000 },
    });
    expect(f.registered).toEqual([{ name: 'word_frequencies', mode: 'development', approvedBy: null }]);
    // The run is charged to the agent: its wall budget held before, what it took settled after.
    expect(f.charge).toEqual(['hold agent:ada 60000', 'run', 'settle ran']);
  });

  it('production mode refuses without the admin override, before any LLM call', async () => {
    const f = fakes(wordFreqTool);
    const r = await generate(f, { ...ask, mode: 'production' });
    expect(r).toMatchObject({
      ok: false,
      reason: 'policy_refused',
      message: expect.stringContaining('production mode without an admin override'),
    });
    expect(f.writes).toBe(0);
    expect(f.sandboxRuns).toEqual([]);
    expect(f.charge).toEqual([]);
    expect(f.audits).toEqual([
      expect.objectContaining({ outcome: 'rejected_policy', mode: 'production', toolName: 'text.word_frequencies' }),
    ]);
  });

  it('production mode with the admin override generates, recording who approved', async () => {
    const f = fakes(wordFreqTool);
    const r = await generate(f, { ...ask, mode: 'production', adminOverride: true });
    expect(r.ok).toBe(true);
    expect(f.registered).toEqual([{ name: 'word_frequencies', mode: 'production', approvedBy: 'admin-override' }]);
  });

  it('a production worker (MINDLOOP_MODE) refuses even when the input asks for development', async () => {
    const f = fakes(wordFreqTool, { mode: 'production', allowOverride: false });
    const r = await generate(f, { ...ask, mode: 'development' });
    expect(r).toMatchObject({ ok: false, reason: 'policy_refused' });
    expect(f.writes).toBe(0);
  });

  it('MINDLOOP_ALLOW_TOOLGEN on a production worker is the admin override', async () => {
    const f = fakes(wordFreqTool, { mode: 'production', allowOverride: true });
    const r = await generate(f, { ...ask });
    expect(r.ok).toBe(true);
    expect(f.registered).toEqual([
      { name: 'word_frequencies', mode: 'production', approvedBy: 'MINDLOOP_ALLOW_TOOLGEN' },
    ]);
  });

  it('a malformed LLM answer ends as malformed_reply', async () => {
    const f = fakes('Sure! Here is your tool: function run() {}');
    const r = await generate(f, { ...ask, mode: 'development' });
    expect(r).toMatchObject({ ok: false, reason: 'malformed_reply', message: expect.stringContaining('not JSON') });
    expect(f.audits[0]).toMatchObject({
      outcome: 'error',
      implementation: 'Sure! Here is your tool: function run() {}',
    });
    expect(f.sandboxRuns).toEqual([]);
  });

  it('unsafe code ends as unsafe_code with the violations, and never reaches the sandbox', async () => {
    const f = fakes({
      ...wordFreqTool,
      module: `import { execSync } from 'node:child_process';\nexport async function run() { return String(globalThis['ev' + 'al']('1')); }\n`,
    });
    const r = await generate(f, { ...ask, mode: 'development' });
    expect(r).toMatchObject({ ok: false, reason: 'unsafe_code' });
    if (r.ok) throw new Error('unreachable');
    expect(r.message).toContain('unsafe code in tool.mjs');
    expect((r.details as Array<{ rule: string }>).map((v) => v.rule)).toEqual(['forbidden_module', 'dynamic_member']);
    expect(f.sandboxRuns).toEqual([]);
    expect(f.audits).toEqual([
      expect.objectContaining({ outcome: 'rejected_static', implementation: expect.stringContaining('child_process') }),
    ]);
  });

  it('unsafe tests are refused too (they run next to the tool)', async () => {
    const f = fakes({ ...wordFreqTool, tests: `import fs from 'node:fs';\nfs.writeFileSync('/tmp/pwned', 'x');\n` });
    const r = await generate(f, { ...ask, mode: 'development' });
    expect(r).toMatchObject({ ok: false, reason: 'unsafe_code', message: expect.stringContaining('tool.test.mjs') });
  });

  it('failing tests end as tests_failed with the test output', async () => {
    const f = fakes({ ...wordFreqTool, module: wordFreqTool.module.replace('toLowerCase()', 'toString()') });
    const r = await generate(f, { ...ask, mode: 'development' });
    expect(r).toMatchObject({ ok: false, reason: 'tests_failed' });
    if (r.ok) throw new Error('unreachable');
    expect(r.message).toMatch(/the tests failed \(exit 1\)/);
    expect(r.message).toContain('counts words case-insensitively');
    expect(f.audits).toEqual([
      expect.objectContaining({
        outcome: 'failed_tests',
        testResult: expect.objectContaining({ status: 'error', exitCode: 1, reason: 'tests_failed' }),
      }),
    ]);
    expect(f.registered).toEqual([]);
  });

  it('tests that run past their budget end as tests_timeout', async () => {
    const f = fakes({
      ...wordFreqTool,
      tests: `import { test } from 'node:test';\ntest('spins', () => { for (;;) {} });\n`,
    });
    const r = await generate(f, { ...ask, mode: 'development', testTimeoutMs: 1500 });
    expect(r).toMatchObject({
      ok: false,
      reason: 'tests_timeout',
      message: 'the tests ran past their 1500 ms budget and were killed',
    });
    expect(f.audits[0]).toMatchObject({
      outcome: 'failed_tests',
      testResult: expect.objectContaining({ status: 'budget_exceeded', exceeded: 'wall_time' }),
    });
  });

  it('a sandbox that cannot run ends as sandbox_error', async () => {
    const f = fakes(wordFreqTool);
    const r = await generate(f, { ...ask, mode: 'development' }, { sandboxDown: true });
    expect(r).toMatchObject({
      ok: false,
      reason: 'sandbox_error',
      message: expect.stringContaining('docker: connect ENOENT'),
    });
    expect(f.registered).toEqual([]);
    // What never ran gives its hold back.
    expect(f.charge).toEqual(['hold agent:ada 60000', 'run', 'settle not run']);
  });

  it('a budget that cannot cover the tests runs nothing and says so', async () => {
    const f = fakes(wordFreqTool);
    f.activities.holdSandboxRun = async () => {
      throw ApplicationFailure.create({
        type: 'LifeforceExhausted',
        nonRetryable: true,
        message: 'lifeforce exhausted: budget agent:ada cannot cover 60 LF (balance; available 12 LF)',
      });
    };
    const r = await generate(f, { ...ask, mode: 'development' });
    expect(r).toMatchObject({
      ok: false,
      reason: 'sandbox_error',
      message: expect.stringContaining('lifeforce exhausted: budget agent:ada cannot cover 60 LF'),
    });
    expect(f.sandboxRuns).toEqual([]);
    expect(f.registered).toEqual([]);
  });

  it('refuses bad input at once, naming the fields', async () => {
    const f = fakes(wordFreqTool);
    const err = await generate(f, {
      capability: 'Bad Capability!',
      description: '',
      mode: 'staging' as 'production',
    }).then(
      () => null,
      (e: unknown) => e,
    );
    expect(err).toBeInstanceOf(WorkflowFailedError);
    const cause = (err as WorkflowFailedError).cause as ApplicationFailure;
    expect(cause.type).toBe('InvalidInput');
    expect(cause.message).toMatch(/capability: .*description: .*mode: /);
    expect(f.writes).toBe(0);
  });

  it('without a requester it notifies nobody', async () => {
    const f = fakes(wordFreqTool);
    await generate(f, { ...ask, mode: 'development' });
    expect(f.notified).toEqual([]);
  });
});

describe('the agent loop asks for a tool (tools.generate) and proceeds when it is ready', () => {
  it('starts toolGenerationWorkflow as a child; the result comes back as a note that wakes the idle loop', async () => {
    const f = fakes(wordFreqTool);
    const thinks: number[] = [];
    const loopActs: Partial<ReturnType<typeof createActivities>> = {
      ...f.activities,
      async loopStarted() {
        return { interruptedTaskLoops: [], config: {} };
      },
      ...unlimitedLifeforce,
      async loopStopped() {},
      async think(input) {
        thinks.push(input.tick);
        const commands: ParsedCommand[] =
          input.tick === 1
            ? [
                {
                  cmdId: 'c1',
                  type: 'tools.generate',
                  args: { capability: 'text.word_frequencies', description: 'count words' },
                },
              ]
            : [];
        return {
          responseId: input.tick,
          summary: `t${input.tick}`,
          provider: 'scripted',
          model: 'fake',
          commands,
          rejected: [],
          parseErrors: [],
          confidence: null,
          unverifiedFacts: 0,
          notesShown: 0,
          promptChars: 10,
          replayed: false,
        };
      },
      async applyCommands(input) {
        return input.commands.map((c) => ({
          cmdId: c.cmdId,
          type: c.type,
          status: 'applied' as const,
          message: 'generating',
          duplicate: false,
          effects:
            c.type === 'tools.generate'
              ? [
                  {
                    kind: 'generateTool' as const,
                    capability: String(c.args.capability),
                    description: String(c.args.description),
                    cmdId: c.cmdId,
                  },
                ]
              : [],
        }));
      },
      async logProcess() {},
    };
    const taskQueue = `toolgen-loop-${++seq}`;
    const sandbox = new LocalProcessSandbox();
    const workers = [
      { taskQueue, workflowBundle: suite.bundle, activities: loopActs },
      { taskQueue: 'sandbox', activities: { sandboxRun: (req: SandboxRunRequest) => sandbox.run(req) } },
    ];
    const status = await withWorker(suite.env, workers, async () => {
      // Idle with no timeout: only a note (the tool's) can wake the loop for tick 2.
      // This test's worker has no reflex activities: the ticks pass as auto_pass.
      const h = await startLoop(
        suite.env.client,
        taskQueue,
        {
          agentId: 'toolsmith',
          maxTicks: 2,
          reflexes: false,
          settings: { idle: { on: true, wakeOn: ['note'], timeoutMs: 3_600_000 } },
        },
        `agent/toolsmith-${seq}`,
      );
      await h.result();
      return h.query<AgentStatus>('status');
    });
    expect(status.tick).toBe(2);
    expect(thinks).toEqual([1, 2]);
    expect(sandbox.runs).toHaveLength(1);
    expect(f.registered).toEqual([{ name: 'word_frequencies', mode: 'development', approvedBy: null }]);
    expect(f.notified).toEqual([
      {
        agentId: 'toolsmith',
        ok: true,
        text: expect.stringMatching(/^Tool word_frequencies \(#42, v1\) is ready for text\.word_frequencies/),
      },
    ]);
    const child = await suite.env.client.workflow.getHandle('tool/toolsmith/text.word_frequencies').describe();
    expect(child.status.name).toBe('COMPLETED');
  });
});
