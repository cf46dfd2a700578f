/**
 * Collaborative tool design with the tests run in the REAL Docker sandbox: the
 * escalation workflow (time-skipping server, real activities on Postgres, the LLM router with a
 * scripted `oversight` row) asks the state_machine_designer sub-agent for spec + implementation
 * + tests; `sandboxRun` on the `sandbox` queue runs `node --test` in a container (the tests
 * check they run as uid 65534 with no network: only the sandbox passes them). v1 fails, its
 * output goes back as feedback, v2 passes and joins the catalogue; a design that never passes
 * stops after `maxDesignRounds` and is not registered; the first-try validation rate follows.
 */
import { and, asc, eq } from 'drizzle-orm';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { escalationMetrics } from '../../db/queries/escalation-metrics.js';
import { createActivities } from '../../activities/index.js';
import { createSandboxActivities } from '../../activities/sandbox.js';
import { createToolActivities } from '../../activities/tools.js';
import type { EscalationInput } from '../../core/escalation.js';
import { agents, discoveredTools, llmRegistry, partnershipMessages, toolRegistry } from '../../db/schema/index.js';
import type { escalationWorkflow } from '../../workflows/escalation.js';
import { dockerSkipped, requireDocker } from '../helpers/docker.js';
import { migratedDatabase, repoToolsDir, type MigratedDatabase } from '../helpers/env.js';
import { withWorker } from '../helpers/harness.js';
import { timeSkippingSuite } from '../helpers/temporal.js';

let handle: MigratedDatabase;
/** What the scripted oversight model answers to a user prompt. */
let oversight: (prompt: string) => string = () => 'no script';
const prompts: string[] = [];

const spec = (name: string) => ({
  name,
  description: 'a turnstile: pay to pass',
  initial: 'LOCKED',
  states: {
    LOCKED: { description: 'locked; pay to unlock', actions: { coin: { to: 'UNLOCKED', description: 'pay' } } },
    UNLOCKED: {
      description: 'unlocked; push to pass',
      actions: {
        push: { to: 'LOCKED', description: 'pass through' },
        coin: { description: 'pay again (stays unlocked)' },
      },
    },
  },
});
/** v1 has the classic turnstile bug: a coin in UNLOCKED locks it again. */
const impl = (
  buggy: boolean,
) => `const next = { LOCKED: { coin: 'UNLOCKED' }, UNLOCKED: { push: 'LOCKED', coin: ${buggy ? "'LOCKED'" : "'UNLOCKED'"} } };
export function run(state, action) {
  const to = next[state]?.[action];
  if (!to) throw new Error(\`invalid action \${action} in \${state}; valid: \${Object.keys(next[state] ?? {}).join(', ')}\`);
  return to;
}
`;
const tests = `import { test } from 'node:test';
import assert from 'node:assert/strict';
import { run } from './tool.mjs';
test('coin unlocks, push locks', () => { assert.equal(run('LOCKED', 'coin'), 'UNLOCKED'); assert.equal(run('UNLOCKED', 'push'), 'LOCKED'); });
test('a second coin keeps it unlocked', () => { assert.equal(run('UNLOCKED', 'coin'), 'UNLOCKED'); });
test('an invalid action names the valid ones', () => { assert.throws(() => run('LOCKED', 'push'), /valid: coin/); });
test('runs in the sandbox: uid 65534, no network', async () => {
  assert.equal(process.getuid(), 65534);
  const { networkInterfaces } = await import('node:os');
  assert.deepEqual(Object.keys(networkInterfaces()).filter((n) => n !== 'lo'), []);
});
`;
const designAnswer = (name: string, buggy: boolean) =>
  JSON.stringify({
    verdict: 'approve',
    solution: buggy ? 'v1' : 'v2',
    teaching_moment: 'a state machine makes invalid actions impossible',
    recommended_tools: [],
    needs_human: false,
    design: { spec: spec(name), implementation: impl(buggy), tests },
  });

describe.skipIf(dockerSkipped)('collaborative tool design with the tests in the Docker sandbox', () => {
  const suite = timeSkippingSuite();
  let run: (input: Omit<EscalationInput, 'category'>) => Promise<Awaited<ReturnType<typeof escalationWorkflow>>>;

  beforeAll(async () => {
    handle = await migratedDatabase('mindloop_esc_design', 10);
    await createToolActivities({ db: handle.db }).ensureBuiltinTools();
    await handle.db.insert(agents).values({ id: 'architect', name: 'architect' });
    await handle.db.insert(llmRegistry).values({
      agentId: 'architect',
      name: 'overseer',
      provider: 'scripted',
      model: 'scripted-oversight',
      role: 'oversight',
      priority: 1,
    });
    const docker = await requireDocker();
    run = async (input) => {
      const taskQueue = `esc-design-${input.escalationId}`;
      const activities = createActivities({
        db: handle.db,
        llm: {
          env: {},
          toolsDir: repoToolsDir,
          scriptedReply: ({ messages }) => (prompts.push(messages[1]!.content), oversight(messages[1]!.content)),
        },
      });
      const workers = [
        { taskQueue, workflowBundle: suite.bundle, activities },
        { taskQueue: 'sandbox', activities: createSandboxActivities({ docker }) },
      ];
      return withWorker(suite.env, workers, () =>
        suite.env.client.workflow.execute<typeof escalationWorkflow>('escalationWorkflow', {
          taskQueue,
          workflowId: `escalation/${input.escalationId}`,
          args: [{ ...input, category: 'state_machine_designer' }],
        }),
      );
    };
  }, 180_000);
  afterAll(async () => {
    await handle?.dispose();
  });

  it('v1 fails its tests in the sandbox, the feedback goes back, v2 passes and joins the catalogue', async () => {
    oversight = (p) => designAnswer('turnstile', !p.includes('failed its tests'));
    const r = await run({ escalationId: 'design-docker-1', agentId: 'architect', task: 'I need a turnstile tool' });
    expect(r).toMatchObject({
      outcome: 'approved',
      decidedBy: 'oversight',
      designRounds: 2,
      designedTool: { name: 'turnstile', rounds: 2 },
    });

    // The v2 prompt carries the real failing test output from the container.
    const v2 = prompts.find((p) => p.includes('Design round 2'))!;
    expect(v2).toContain('not ok 2 - a second coin keeps it unlocked');
    expect(v2).toContain('exit 1');
    const rounds = await handle.db
      .select()
      .from(partnershipMessages)
      .where(eq(partnershipMessages.escalationId, 'design-docker-1'))
      .orderBy(asc(partnershipMessages.id));
    expect(rounds.filter((m) => m.kind.startsWith('design_')).map((m) => [m.kind, m.metadata.round])).toEqual([
      ['design_failed', 1],
      ['design_passed', 2],
    ]);

    const [tool] = await handle.db.select().from(toolRegistry).where(eq(toolRegistry.name, 'turnstile'));
    expect(tool).toMatchObject({
      kind: 'designed',
      status: 'active',
      createdBy: 'oversight',
      implementation: impl(false),
      tests,
    });
    expect(tool!.spec).toMatchObject({
      initial: 'LOCKED',
      design: { rounds: 2, firstTry: false, escalationId: 'design-docker-1' },
    });
    const [d] = await handle.db
      .select()
      .from(discoveredTools)
      .where(and(eq(discoveredTools.agentId, 'architect'), eq(discoveredTools.toolId, tool!.id)));
    expect(d).toMatchObject({ via: 'design', escalationId: 'design-docker-1' });

    // The agent uses it as a state machine at once: an invalid action lists the valid ones.
    const tools = createToolActivities({ db: handle.db });
    expect(
      await tools.callTool({ agentId: 'architect', tool: 'turnstile', action: 'push', key: 'architect/1' }),
    ).toMatchObject({ ok: false, refused: 'invalid_action', validActions: ['coin'] });
    expect(
      await tools.callTool({ agentId: 'architect', tool: 'turnstile', action: 'coin', key: 'architect/2' }),
    ).toMatchObject({ ok: true, state: 'UNLOCKED' });
  }, 180_000);

  it('a design that never passes stops after maxDesignRounds and is not registered', async () => {
    prompts.length = 0;
    oversight = () => designAnswer('broken_turnstile', true);
    const r = await run({
      escalationId: 'design-docker-2',
      agentId: 'architect',
      task: 'another turnstile',
      maxDesignRounds: 2,
    });
    expect(r).toMatchObject({ outcome: 'denied', decidedBy: 'oversight', designRounds: 2 });
    expect(r.designedTool).toBeUndefined();
    expect(prompts).toHaveLength(2);
    expect(await handle.db.select().from(toolRegistry).where(eq(toolRegistry.name, 'broken_turnstile'))).toEqual([]);
  }, 180_000);

  it('a design that passes on the first try counts in the first-try validation rate', async () => {
    oversight = () => designAnswer('gate', false);
    const r = await run({ escalationId: 'design-docker-3', agentId: 'architect', task: 'a gate tool' });
    expect(r).toMatchObject({ outcome: 'approved', designRounds: 1, designedTool: { name: 'gate', rounds: 1 } });
    const m = await escalationMetrics(handle.db, 'architect');
    expect(m.designedTools).toEqual({ total: 2, firstTry: 1, firstTryRate: 0.5 });
    expect(m.discovery.byVia).toEqual({ design: 2 });
    expect(m.catalogue.byKind).toEqual({ builtin: 4, designed: 2 });
  }, 180_000);
});
