/**
 * Ouroboros end to end: the real LLM router (a scripted `agent` row answering the tool as
 * JSON), the real activities on the real Postgres, and the tests of the generated tool run in
 * the real Docker sandbox (`sandboxRun` on the `sandbox` queue). A good tool is registered
 * (tool_registry, discovered_tools, audit with the full source, a generated_tool learning in
 * the real learning store);
 * an unsafe one and one whose tests fail are kept for audit only.
 */
import { and, eq } from 'drizzle-orm';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createActivities } from '../../activities/index.js';
import { createSandboxActivities } from '../../activities/sandbox.js';
import type { GeneratedTool } from '../../core/tool-generation.js';
import {
  agents,
  discoveredTools,
  generatedToolsAudit,
  learnings,
  llmRegistry,
  toolRegistry,
} from '../../db/schema/index.js';
import type { toolGenerationWorkflow } from '../../workflows/tool-generation.js';
import { dockerSkipped, requireDocker } from '../helpers/docker.js';
import { migratedDatabase, repoToolsDir, type MigratedDatabase } from '../helpers/env.js';
import { withWorker } from '../helpers/harness.js';
import { timeSkippingSuite } from '../helpers/temporal.js';
import { wordFreqTool } from '../fixtures/tools/word-frequencies.js';

let handle: MigratedDatabase;

describe.skipIf(dockerSkipped)('toolGenerationWorkflow with Postgres, the router and the Docker sandbox', () => {
  const suite = timeSkippingSuite();
  beforeAll(async () => {
    handle = await migratedDatabase('mindloop_toolgen', 10);
  });
  afterAll(async () => {
    await handle?.dispose();
  });

  /** An agent whose only `agent` LLM answers `reply`; one generation run against it. */
  async function generate(agentId: string, reply: GeneratedTool, testTimeoutMs?: number) {
    const db = handle.db;
    await db.insert(agents).values({ id: agentId, name: agentId });
    await db.insert(llmRegistry).values({
      agentId,
      name: 'toolsmith',
      provider: 'scripted',
      model: 'scripted-toolsmith',
      role: 'agent',
      priority: 1,
      params: { replies: [JSON.stringify(reply)] },
    });
    const docker = await requireDocker();
    const taskQueue = `toolgen-it-${agentId}`;
    const activities = createActivities({
      db,
      llm: { env: {}, toolsDir: repoToolsDir },
      toolGeneration: { mode: 'development', allowOverride: false },
      // No sink injected: the generated_tool learning goes to the real learning store.
    });
    const workers = [
      { taskQueue, workflowBundle: suite.bundle, activities },
      { taskQueue: 'sandbox', activities: createSandboxActivities({ docker }) },
    ];
    return withWorker(suite.env, workers, () =>
      suite.env.client.workflow.execute<typeof toolGenerationWorkflow>('toolGenerationWorkflow', {
        taskQueue,
        workflowId: `tool/${agentId}/text.word_frequencies`,
        args: [{ agentId, capability: 'text.word_frequencies', description: 'count words in a text', testTimeoutMs }],
      }),
    );
  }

  it('registers a tool whose tests pass in the sandbox, with its learning and full audit', async () => {
    const r = await generate('smith', wordFreqTool);
    expect(r).toMatchObject({
      ok: true,
      tool: { name: 'word_frequencies', capability: 'text.word_frequencies', version: 1 },
    });
    if (!r.ok) throw new Error(r.message);
    const db = handle.db;
    const [tool] = await db.select().from(toolRegistry).where(eq(toolRegistry.name, 'word_frequencies'));
    expect(tool).toMatchObject({
      id: r.tool.id,
      kind: 'generated',
      status: 'active',
      capability: 'text.word_frequencies',
      implementation: wordFreqTool.module,
      tests: wordFreqTool.tests,
      createdBy: 'smith',
    });
    expect(
      await db
        .select()
        .from(discoveredTools)
        .where(and(eq(discoveredTools.agentId, 'smith'), eq(discoveredTools.toolId, r.tool.id))),
    ).toHaveLength(1);
    const [audit] = await db.select().from(generatedToolsAudit).where(eq(generatedToolsAudit.id, r.auditId));
    expect(audit).toMatchObject({
      agentId: 'smith',
      toolName: 'word_frequencies',
      toolId: r.tool.id,
      intent: 'text.word_frequencies',
      outcome: 'registered',
      mode: 'development',
      implementation: wordFreqTool.module,
      tests: wordFreqTool.tests,
    });
    expect(audit!.safetyCheck).toMatchObject({ ok: true, violations: [] });
    // The tests really ran in the sandbox image: node's test runner reported one pass.
    expect(audit!.testResult).toMatchObject({ status: 'ok', exitCode: 0, imageId: expect.stringMatching(/^sha256:/) });
    expect(String(audit!.testResult!.stdout)).toMatch(/# pass 1/);
    const learned = await db.select().from(learnings).where(eq(learnings.factPredicate, 'generated_tool'));
    expect(learned.map((l) => [l.agentId, l.shardType, l.factArgs, l.sourceCampaign, l.confidence])).toEqual([
      [
        'smith',
        'tools',
        { name: 'word_frequencies', capability: 'text.word_frequencies' },
        'tool/smith/word_frequencies',
        1,
      ],
    ]);
  }, 180_000);

  it('an unsafe tool is kept for audit only', async () => {
    const evil = {
      ...wordFreqTool,
      name: 'evil_counter',
      module: `import { execSync } from 'node:child_process';\nexport async function run() { return String(execSync('id')); }\n`,
    };
    const r = await generate('trickster', evil);
    expect(r).toMatchObject({ ok: false, reason: 'unsafe_code' });
    const db = handle.db;
    expect(await db.select().from(toolRegistry).where(eq(toolRegistry.name, 'evil_counter'))).toEqual([]);
    const audits = await db.select().from(generatedToolsAudit).where(eq(generatedToolsAudit.agentId, 'trickster'));
    expect(audits).toHaveLength(1);
    expect(audits[0]).toMatchObject({ outcome: 'rejected_static', implementation: evil.module, testResult: null });
    expect((audits[0]!.safetyCheck as { violations: Array<{ rule: string }> }).violations[0]!.rule).toBe(
      'forbidden_module',
    );
  }, 120_000);

  it('a tool whose tests fail in the sandbox is not registered', async () => {
    const broken = { ...wordFreqTool, name: 'broken_counter', module: wordFreqTool.module.replace('+ 1', '+ 2') };
    const r = await generate('clumsy', broken);
    expect(r).toMatchObject({
      ok: false,
      reason: 'tests_failed',
      message: expect.stringContaining("in 'counts words case-insensitively'"),
    });
    const db = handle.db;
    expect(await db.select().from(toolRegistry).where(eq(toolRegistry.name, 'broken_counter'))).toEqual([]);
    const [audit] = await db.select().from(generatedToolsAudit).where(eq(generatedToolsAudit.agentId, 'clumsy'));
    expect(audit).toMatchObject({
      outcome: 'failed_tests',
      testResult: expect.objectContaining({ status: 'error', exitCode: 1, reason: 'tests_failed' }),
    });
  }, 180_000);

  it('tests that spin past their budget are killed in the sandbox: tests_timeout', async () => {
    const spinner = {
      ...wordFreqTool,
      name: 'spinner',
      tests: `import { test } from 'node:test';\ntest('spins', () => { for (;;) {} });\n`,
    };
    const r = await generate('spinner', spinner, 3000);
    expect(r).toMatchObject({
      ok: false,
      reason: 'tests_timeout',
      message: 'the tests ran past their 3000 ms budget and were killed',
    });
    const [audit] = await handle.db
      .select()
      .from(generatedToolsAudit)
      .where(eq(generatedToolsAudit.agentId, 'spinner'));
    expect(audit).toMatchObject({
      outcome: 'failed_tests',
      testResult: expect.objectContaining({ status: 'budget_exceeded', exceeded: 'wall_time' }),
    });
  }, 180_000);
});
