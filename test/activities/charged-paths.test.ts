/**
 * Every code path that runs the sandbox or calls a model moves the lifeforce ledger, once.
 *
 * The paths are read from the code with TypeScript's checker: each call of the LLM router's
 * `chat`, each use of the sandbox queue's `sandboxRun` in a workflow, and each activity that makes
 * a `shell` effect (which the agent loop runs in the sandbox). Each path found must have a
 * scenario in `paths` below, and a path that is gone must leave it: a new path nobody priced fails
 * here. Behind them the gates: a chat model is asked only by the router (after its hold) or by a
 * person's test of a catalogue model (no agent's call), the sandbox engine only by the sandbox
 * queue's activity (which only the paths found call).
 *
 * Each scenario runs its path against the real Postgres — the activity itself, or the workflow on
 * the time-skipping server with the real activities and a local stand-in of the sandbox — and
 * shows a hold taken and settled (a `reserve` entry and its `settle`, with a charge) under the
 * path's own key; then it runs the same step again with the same key (the activity once more, or
 * a workflow's charging activities again with the inputs its history recorded), and the ledger
 * does not move.
 */
import { join, relative } from 'node:path';
import { defaultPayloadConverter } from '@temporalio/common';
import { MockActivityEnvironment, type TestWorkflowEnvironment } from '@temporalio/testing';
import { Worker, type WorkflowBundleWithSourceMap } from '@temporalio/worker';
import type { WorkflowHandle } from '@temporalio/client';
import { gt, max } from 'drizzle-orm';
import ts from 'typescript';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createActivities } from '../../activities/index.js';
import type { ScriptedReplyFn } from '../../activities/llm/index.js';
import { createSandboxActivities } from '../../activities/sandbox.js';
import { createToolActivities } from '../../activities/tools.js';
import { escalationInput } from '../../core/escalation.js';
import { renderCommandBlock } from '../../core/reply-parser.js';
import {
  agentConfig,
  agentPeers,
  agents,
  discoveredTools,
  lifeforceLedger,
  llmRegistry,
  toolRegistry,
  type LifeforceLedgerEntry,
} from '../../db/schema/index.js';
import { approveUpdate, escalationStatusQuery } from '../../workflows/escalation.js';
import { wordFreqTool } from '../fixtures/tools/word-frequencies.js';
import { migratedDatabase, repoToolsDir, tempDir, type MigratedDatabase } from '../helpers/env.js';
import { seedForkableAgent } from '../helpers/fork-fixture.js';
import { LocalProcessSandbox } from '../helpers/local-sandbox.js';
import { collisionModel } from '../helpers/nerves.js';
import { neutralReflexReplies, thinkInput as scriptedThinkInput } from '../helpers/scripted.js';
import { startWorkers, untilQuery, type RunningWorkers } from '../helpers/harness.js';
import { timeSkippingSuite } from '../helpers/temporal.js';

// ---- the paths, read from the code ------------------------------------------------------------

const root = join(import.meta.dirname, '..', '..');
/** The product's folders (tests and benches are not paths of the product). */
const productDirs = ['activities', 'workflows', 'runtime', 'cli', 'workers', 'core', 'db', 'sandbox'];

type SiteKind = 'llm' | 'sandbox' | 'shell-effect' | 'model' | 'engine';
interface Site {
  id: string;
  kind: SiteKind;
  /** The call's argument text (an LLM call must name its idempotency key). */
  args: string;
}

/** `file › outer.inner`: the named functions, methods and properties around a node. */
function scopeOf(node: ts.Node): string {
  const names: string[] = [];
  for (let n: ts.Node | undefined = node.parent; n; n = n.parent) {
    if ((ts.isFunctionDeclaration(n) || ts.isMethodDeclaration(n) || ts.isClassDeclaration(n)) && n.name)
      names.unshift(n.name.getText());
    else if (
      ts.isPropertyAssignment(n) &&
      (ts.isCallExpression(n.initializer) ||
        ts.isArrowFunction(n.initializer) ||
        ts.isFunctionExpression(n.initializer))
    )
      names.unshift(n.name.getText());
    else if ((ts.isArrowFunction(n) || ts.isFunctionExpression(n)) && ts.isVariableDeclaration(n.parent))
      names.unshift(n.parent.name.getText());
  }
  return `${relative(root, node.getSourceFile().fileName)} › ${names.join('.') || '(module)'}`;
}

/** Whether `name` resolves to a member of `container` declared in `file` (an interface or a class). */
function memberOf(checker: ts.TypeChecker, name: ts.Node, container: string, file: string): boolean {
  return (checker.getSymbolAtLocation(name)?.declarations ?? []).some((d) => {
    const parent = d.parent;
    return (
      (ts.isInterfaceDeclaration(parent) || ts.isClassDeclaration(parent)) &&
      parent.name?.text === container &&
      relative(root, d.getSourceFile().fileName) === file
    );
  });
}

function scanPaths(): Site[] {
  const config = ts.getParsedCommandLineOfConfigFile(
    join(root, 'tsconfig.json'),
    {},
    { ...ts.sys, onUnRecoverableConfigFileDiagnostic: () => undefined },
  );
  if (!config) throw new Error('tsconfig.json did not parse');
  const files = config.fileNames.filter((f) => productDirs.includes(relative(root, f).split('/')[0]!));
  const program = ts.createProgram(files, config.options);
  const checker = program.getTypeChecker();
  const sites = new Map<string, Site>();
  const add = (node: ts.Node, kind: SiteKind, args = '') => {
    const id = scopeOf(node);
    const seen = sites.get(`${kind} ${id}`);
    sites.set(`${kind} ${id}`, { id, kind, args: seen ? `${seen.args}\n${args}` : args });
  };
  for (const file of files) {
    const visit = (node: ts.Node): void => {
      if (ts.isCallExpression(node) && ts.isPropertyAccessExpression(node.expression)) {
        const name = node.expression.name;
        const args = node.arguments.map((a) => a.getText()).join(', ');
        if (name.text === 'chat' && memberOf(checker, name, 'LlmRouter', 'activities/llm/router.ts'))
          add(node, 'llm', args);
        if (name.text === 'invoke' && memberOf(checker, name, 'ChatModel', 'activities/llm/types.ts'))
          add(node, 'model');
        if (name.text === 'run' && memberOf(checker, name, 'Sandbox', 'sandbox/sandbox.ts')) add(node, 'engine');
      }
      if (ts.isPropertyAccessExpression(node) && node.name.text === 'sandboxRun') add(node, 'sandbox');
      if (
        ts.isObjectLiteralExpression(node) &&
        node.properties.some(
          (p) =>
            ts.isPropertyAssignment(p) &&
            p.name.getText() === 'kind' &&
            ts.isStringLiteral(p.initializer) &&
            p.initializer.text === 'shell',
        )
      )
        add(node, 'shell-effect');
      ts.forEachChild(node, visit);
    };
    visit(program.getSourceFile(file)!);
  }
  return [...sites.values()].sort((a, b) => a.id.localeCompare(b.id));
}

// ---- the ledger -------------------------------------------------------------------------------

let h: MigratedDatabase;
let acts: ReturnType<typeof createActivities>;
// The time-skipping server and the product's bundle of the describe that runs the paths.
let env: TestWorkflowEnvironment;
let workflowBundle: WorkflowBundleWithSourceMap;
const taskQueue = 'charged-paths';
const data = tempDir('charged-paths');

const lastEntry = async () => (await h.db.select({ id: max(lifeforceLedger.id) }).from(lifeforceLedger))[0]?.id ?? 0;
const entriesAfter = (id: number) =>
  h.db.select().from(lifeforceLedger).where(gt(lifeforceLedger.id, id)).orderBy(lifeforceLedger.id);

/**
 * Run `call` and show that it held and settled, for every key prefix in `keys`, at least one hold
 * of `operation`, each closed by a settle that charged something; then run `again` (the same step
 * with the same key) and show that the ledger does not move. Returns the entries of the first run.
 */
async function provesCharged(
  operation: 'llm_call' | 'sandbox',
  keys: string[],
  call: () => Promise<unknown>,
  again: () => Promise<unknown> = call,
): Promise<LifeforceLedgerEntry[]> {
  const before = await lastEntry();
  await call();
  const added = await entriesAfter(before);
  for (const prefix of keys) {
    const holds = added.filter(
      (e) => e.kind === 'reserve' && e.operation === operation && e.idempotencyKey.startsWith(prefix),
    );
    expect(
      holds.length,
      `a ${operation} hold under ${prefix}… (the ledger got: ${added.map((e) => `${e.kind} ${e.idempotencyKey}`).join('; ') || 'nothing'})`,
    ).toBeGreaterThan(0);
    for (const hold of holds) {
      const close = added.find((e) => e.reservationKey === hold.idempotencyKey);
      expect(close, `the close of ${hold.idempotencyKey}`).toMatchObject({ kind: 'settle', operation });
      expect(close!.amount, `the charge of ${hold.idempotencyKey}`).toBeGreaterThan(0);
    }
  }
  const settled = await lastEntry();
  await again();
  expect(
    (await entriesAfter(settled)).map((e) => `${e.kind} ${e.idempotencyKey}`),
    'the same step again moves nothing',
  ).toEqual([]);
  return added;
}

/**
 * Run again, with the inputs the history recorded, each of the workflow's activities named (a
 * retry of each); and replay the history on the workflow code (the charge keeps it deterministic).
 */
async function rerunFromHistory(handle: WorkflowHandle, names: readonly string[]): Promise<void> {
  const history = await handle.fetchHistory();
  await Worker.runReplayHistory({ workflowBundle }, history, handle.workflowId);
  const runs: string[] = [];
  for (const e of history.events ?? []) {
    const a = e.activityTaskScheduledEventAttributes;
    const name = a?.activityType?.name;
    if (!a || !name || !names.includes(name)) continue;
    const args = (a.input?.payloads ?? []).map((p) => defaultPayloadConverter.fromPayload(p));
    await (acts as unknown as Record<string, (...x: unknown[]) => Promise<unknown>>)[name]!(...args);
    runs.push(name);
  }
  expect(runs.length, `the history of ${handle.workflowId} schedules ${names.join(', ')}`).toBeGreaterThan(0);
}

// ---- the models and the agents ----------------------------------------------------------------

/** A tick's reply: a new one each time (an identical reply is not rated for novelty), with a command to validate. */
let thoughts = 0;
const thought = () =>
  `Finding ${++thoughts}: the ${['barrels', 'beds', 'bees', 'paths'][thoughts % 4]} need work.\n${renderCommandBlock([{ cmdId: 'c1', type: 'diary.add', args: { title: 'found', content: 'a finding' } }])}`;
const nerveModel = collisionModel();
const spec = {
  name: 'light_switch',
  description: 'a light switch',
  initial: 'OFF',
  states: {
    OFF: { description: 'dark', actions: { flip: { to: 'ON', description: 'light' } } },
    ON: { description: 'light', actions: { flip: { to: 'OFF', description: 'dark' } } },
  },
};
const design = {
  spec,
  implementation:
    "export function run(state, action) { if (action !== 'flip') throw new Error('invalid'); return state === 'OFF' ? 'ON' : 'OFF'; }\n",
  tests:
    "import { test } from 'node:test';\nimport assert from 'node:assert/strict';\nimport { run } from './tool.mjs';\ntest('flips', () => { assert.equal(run('OFF', 'flip'), 'ON'); });\n",
};
const oversightAnswer = (designs: boolean) =>
  JSON.stringify({
    verdict: 'approve',
    solution: 'go ahead',
    teaching_moment: 'check first',
    recommended_tools: [],
    needs_human: false,
    ...(designs ? { design } : {}),
  });

/** One scripted model for every purpose the paths ask for. */
const reply: ScriptedReplyFn = (call) => {
  const { purpose } = call;
  if (purpose === 'think') return thought();
  if (purpose === 'nerve') return nerveModel(call);
  if (purpose === 'tool_generation') return JSON.stringify(wordFreqTool);
  if (purpose === 'campaign_checkpoint') return '{"pass": true, "reason": "done"}';
  if (purpose === 'fork_replay') return 'A new idea about the garden: rain barrels feed the drip lines.';
  if (purpose === 'fork_judge') return '2';
  if (purpose?.startsWith('oversight:')) return oversightAnswer(purpose === 'oversight:state_machine_designer');
  return (purpose && neutralReflexReplies[purpose]) ?? 'OK';
};

async function seedAgent(id: string): Promise<void> {
  await h.db.insert(agents).values({ id, name: id, status: 'running', lastSeenAt: new Date() });
  await h.db.insert(llmRegistry).values(
    ['agent', 'validator', 'oversight', 'task'].map((role) => ({
      agentId: id,
      name: `${role}-model`,
      provider: 'scripted' as const,
      model: `scripted-${role}`,
      role: role as 'agent',
      priority: 1,
    })),
  );
  await createToolActivities({ db: h.db }).grantStarterTools({ agentId: id });
}

const thinkInput = (agentId: string, tick: number) => scriptedThinkInput(agentId, tick, 256);

/** The think and the reflexes of one tick, as the agent loop runs them (the reflexes are returned, not run). */
async function thinkThenReflexes(agentId: string, tick: number) {
  const t = await acts.think(thinkInput(agentId, tick));
  const params = { temperature: 0.7, topP: 0.9, presencePenalty: 0, frequencyPenalty: 0 };
  const input = {
    agentId,
    tick,
    workflowId: `agent/${agentId}`,
    responseId: t.responseId!,
    commands: t.commands.map((c) => ({ cmdId: c.cmdId, type: c.type, args: c.args })),
    params,
    defaults: params,
    stagnation: { lowStreak: 0, anxietyStreak: 0, pending: null, lastStrategyTick: 0 },
    contextMode: 'standard' as const,
  };
  return () => acts.tickReflexes(input);
}

/** A command applied by applyCommands, its `shell` effect run in the local sandbox, the run recorded: the agent loop's way. */
async function runShellEffect(
  agentId: string,
  tick: number,
  cmd: { cmdId: string; type: string; args: Record<string, unknown> },
  approvedBy?: string,
) {
  const apply = () =>
    acts.applyCommands({
      agentId,
      tick,
      workflowId: `agent/${agentId}`,
      mode: 'main',
      commands: [cmd],
      ...(approvedBy ? { approvedBy } : {}),
    });
  const [outcome] = await apply();
  const effect = outcome!.effects.find((e) => e.kind === 'shell');
  if (effect?.kind !== 'shell') throw new Error(`no shell effect: ${outcome!.message}`);
  const result = await new LocalProcessSandbox().run({
    key: effect.key,
    command: effect.argv ?? ['sh', '-c', effect.command],
    ...(effect.files ? { files: effect.files } : {}),
    budget: { wallMs: effect.timeoutMs ?? 30_000 },
  });
  const record = () =>
    acts.recordShellResult({
      agentId,
      tick,
      cmdId: effect.cmdId,
      processId: effect.processId,
      command: effect.command,
      result,
    });
  await record();
  expect(result.status).toBe('ok');
  return { processId: effect.processId, again: async () => (await apply(), await record()) };
}

// ---- the scenarios, one per path --------------------------------------------------------------

/** A path's proof; several paths may share one (it runs once). */
type Scenario = () => Promise<void>;
const once = (s: Scenario): Scenario => {
  let ran: Promise<void> | undefined;
  return () => (ran ??= s());
};

const shellCommand = once(async () => {
  await seedAgent('sh-ada');
  let again: () => Promise<unknown> = async () => undefined;
  await provesCharged(
    'sandbox',
    ['sandbox:sh-ada/shell.t5.c1'],
    async () =>
      ({ again } = await runShellEffect('sh-ada', 5, {
        cmdId: 'c1',
        type: 'shell',
        args: { command: 'echo charged' },
      })),
    () => again(),
  );
});

const designedToolAction = once(async () => {
  await seedAgent('dt-ada');
  const [tool] = await h.db
    .insert(toolRegistry)
    .values({
      name: 'lamp',
      kind: 'designed',
      status: 'active',
      createdBy: 'oversight',
      implementation: "export function run(state) { return state === 'OFF' ? 'ON' : 'OFF'; }\n",
      tests: '',
      spec: { states: ['OFF', 'ON'], initial: 'OFF', machine: { ...spec, name: 'lamp' } },
    })
    .returning({ id: toolRegistry.id });
  await h.db.insert(discoveredTools).values({ agentId: 'dt-ada', toolId: tool!.id, via: 'design' });
  let again: () => Promise<unknown> = async () => undefined;
  await provesCharged(
    'sandbox',
    ['sandbox:dt-ada/tool.t6.c1'],
    async () =>
      ({ again } = await runShellEffect('dt-ada', 6, {
        cmdId: 'c1',
        type: 'tool.call',
        args: { tool: 'lamp', action: 'flip', args: {} },
      })),
    () => again(),
  );
});

const approvedShell = once(async () => {
  await seedAgent('esc-sh');
  let handle: WorkflowHandle | undefined;
  await provesCharged(
    'sandbox',
    ['sandbox:esc-sh/shell.t4.approved.esc-sh-1'],
    async () => {
      handle = await env.client.workflow.start('escalationWorkflow', {
        taskQueue,
        workflowId: 'escalation/esc-sh-1',
        args: [
          {
            escalationId: 'esc-sh-1',
            agentId: 'esc-sh',
            task: 'run a shell command',
            tick: 4,
            humanRequired: true,
            proposal: { kind: 'command', name: 'shell', args: { command: 'echo approved' } },
          },
        ],
      });
      await untilQuery(
        handle,
        escalationStatusQuery,
        (s) => s.phase === 'awaiting_human',
        'awaiting the human',
        30_000,
      );
      await handle.executeUpdate(approveUpdate, { args: [{ by: 'carol' }] });
      expect(await handle.result()).toMatchObject({ outcome: 'approved', proposalOutcome: 'executed' });
    },
    () => rerunFromHistory(handle!, ['applyCommands', 'recordShellResult']),
  );
});

/** A workflow whose own sandbox run is charged: run it, then its hold and settle again from its history. */
const workflowRun = (
  workflowType: string,
  workflowId: string,
  args: unknown,
  key: string,
  check: (result: unknown) => void,
): Scenario =>
  once(async () => {
    let handle: WorkflowHandle | undefined;
    await provesCharged(
      'sandbox',
      [key],
      async () => {
        handle = await env.client.workflow.start(workflowType, { taskQueue, workflowId, args: [args] });
        check(await handle.result());
      },
      () => rerunFromHistory(handle!, ['holdSandboxRun', 'settleSandboxRun']),
    );
  });

const designRound = workflowRun(
  'escalationWorkflow',
  'escalation/design-1',
  { escalationId: 'design-1', agentId: 'ada', task: 'I need a light switch', category: 'state_machine_designer' },
  'sandbox:escalation/design-1/design/r1',
  (r) => expect(r).toMatchObject({ outcome: 'approved', designRounds: 1, designedTool: { name: 'light_switch' } }),
);

const generatedToolTests = workflowRun(
  'toolGenerationWorkflow',
  'tool/ada/text.word_frequencies',
  { agentId: 'ada', capability: 'text.word_frequencies', description: 'count words in a text', mode: 'development' },
  'sandbox:tool/ada/text.word_frequencies/',
  (r) => expect(r).toMatchObject({ ok: true, tool: { name: 'word_frequencies' } }),
);

const forkToolTests = once(async () => {
  await seedForkableAgent(h.db, 'fk-tool');
  await h.db.insert(toolRegistry).values({
    name: 'adder',
    kind: 'generated',
    implementation: 'export const add = (a, b) => a - b;',
    tests: '',
    status: 'active',
  });
  const tests = "import { add } from './tool.mjs';\nif (add(2, 3) !== 5) process.exit(1);\n";
  await workflowRun(
    'successorForkWorkflow',
    'fork/tool-1',
    {
      agentId: 'fk-tool',
      patch: { kind: 'tool', tool: 'adder', implementation: 'export const add = (a, b) => a * b;', tests },
      evaluation: { kind: 'tool_tests' },
      budget: { cpus: 1 },
    },
    'sandbox:fork/tool-1/tool-tests',
    (r) => expect(r).toMatchObject({ verdict: 'REJECT' }),
  )();
});

const llm = (keys: string[], call: () => Promise<unknown>, again?: () => Promise<unknown>) =>
  provesCharged('llm_call', keys, call, again).then(() => undefined);

const think = once(async () => {
  await seedAgent('th-ada');
  await llm(['llm:agent/th-ada:1:think@'], () => acts.think(thinkInput('th-ada', 1)));
});

const reflexes = once(async () => {
  await seedAgent('rf-ada');
  await (
    await thinkThenReflexes('rf-ada', 1)
  )();
  await llm(
    ['llm:agent/rf-ada:2:emotion@', 'llm:agent/rf-ada:2:novelty@', 'llm:agent/rf-ada:2:validate:'],
    await thinkThenReflexes('rf-ada', 2),
  );
});

const peerValidation = once(async () => {
  await seedAgent('pv-ada');
  await seedAgent('pv-bea');
  await h.db
    .insert(agentPeers)
    .values({ agentId: 'pv-ada', peerAgentId: 'pv-bea', status: 'active', trust: 0.9, lastSeenAt: new Date() });
  await h.db.insert(agentConfig).values({ agentId: 'pv-ada', key: 'peer_validators', value: 1 });
  await llm(['llm:agent/pv-ada:1:validate:peer:pv-bea@'], await thinkThenReflexes('pv-ada', 1));
});

/** A retry of an activity keeps its workflow run and activity id (only the attempt changes). */
const inActivity = <A extends unknown[], R>(workflowId: string, fn: (...a: A) => Promise<R>, ...args: A) => {
  const info = { activityId: '7', workflowExecution: { workflowId, runId: 'run-1' } };
  return [
    () => new MockActivityEnvironment({ ...info, attempt: 1 }).run(fn, ...args),
    () => new MockActivityEnvironment({ ...info, attempt: 2 }).run(fn, ...args),
  ] as const;
};

const probe = once(async () => {
  await seedAgent('pr-ada');
  const [first, retry] = inActivity('agent/pr-ada', acts.probeLlm, { agentId: 'pr-ada', role: 'agent' as const });
  await llm(['llm:agent/pr-ada/run-1/7/probe@'], first, retry);
});

const bareChat = once(async () => {
  await seedAgent('lc-ada');
  const [first, retry] = inActivity('agent/lc-ada', acts.llmChat, {
    agentId: 'lc-ada',
    role: 'agent' as const,
    messages: [{ role: 'user' as const, content: 'Say OK.' }],
  });
  await llm(['llm:agent/lc-ada/run-1/7/llm_chat@'], first, retry);
});

const llmTask = once(async () => {
  await seedAgent('lt-ada');
  await llm(['llm:agent/lt-ada:llm_task:3:c1@'], () =>
    acts.askLlmOnce({
      agentId: 'lt-ada',
      tick: 3,
      cmdId: 'c1',
      key: 'agent/lt-ada:llm_task:3:c1',
      question: 'What is 2 + 2?',
      role: 'agent',
    }),
  );
});

const nerve = once(async () => {
  await seedAgent('nv-ada');
  const observation = { t: 3, distanceM: 12, closingSpeedMps: 6, bearingDeg: 5, obstacle: true };
  await llm(['llm:nv-ada/collision/1@'], () =>
    acts.nerveDecide({
      agentId: 'nv-ada',
      nerve: 'collision',
      state: 'EVALUATE',
      observation,
      mode: 'deliberate',
      key: 'nv-ada/collision/1',
      at: Date.UTC(2026, 10, 24, 12),
    }),
  );
});

const writeTool = once(async () => {
  await seedAgent('wt-ada');
  await llm(['llm:tool/wt-ada/text.count/run-1/write@'], () =>
    acts.writeTool({
      agentId: 'wt-ada',
      capability: 'text.count',
      description: 'count words',
      role: 'agent',
      key: 'tool/wt-ada/text.count/run-1/write',
    }),
  );
});

const campaignTask = once(async () => {
  await seedAgent('ct-ada');
  await llm(['llm:campaign/c1/p1/t1:ask@'], () =>
    acts.runCampaignTask({
      campaignId: 'c1',
      agentId: 'ct-ada',
      key: 'campaign/c1/p1/t1',
      type: 'llm.ask',
      args: { prompt: 'Name one garden tool.' },
    }),
  );
});

const checkpoint = once(async () => {
  await seedAgent('cp-ada');
  await llm(['llm:campaign/c2/p1:checkpoint@'], () =>
    acts.validateCheckpoint({
      campaignId: 'c2',
      agentId: 'cp-ada',
      key: 'campaign/c2/p1',
      phase: { name: 'dig', type: 'research', objectives: ['dig a bed'] },
      checkpoint: { validator: { role: 'validator' }, criteria: { expect: [] } },
      outcomes: [{ name: 't1', type: 'llm.ask', ok: true }],
    }),
  );
});

const oversight = once(async () => {
  await seedAgent('ov-ada');
  const escalation = escalationInput.parse({
    escalationId: 'ov-1',
    agentId: 'ov-ada',
    task: 'help me plan',
    category: 'general',
  });
  await llm(['llm:escalation/ov-1/r1/general/a1@'], () =>
    acts.runOversight({ escalation, round: 1, key: 'escalation/ov-1' }),
  );
});

/** A fork spawned and patched, with its budget carved, as the fork workflow has it before its evaluation. */
async function spawnedFork(forkId: string, agentId: string, patch: unknown, evaluation: unknown): Promise<string> {
  await seedForkableAgent(h.db, agentId);
  await h.db
    .insert(llmRegistry)
    .values({ agentId, name: 'thinker', provider: 'scripted', model: 'thinker', role: 'agent' });
  const spawned = await acts.forkSpawn({
    forkId,
    workflowId: `fork/${forkId}`,
    agentId,
    patch: patch as never,
    evaluation: evaluation as never,
    budget: { wallMs: 600_000, costUsd: 5, diskBytes: 1 << 30, cpus: 1 },
    startedAtMs: Date.now(),
  });
  await acts.forkApplyPatch({ forkId });
  const carved = await acts.openChildBudget({
    parentId: `agent:${agentId}`,
    id: `fork:${forkId}`,
    agentId,
    scope: 'fork',
    amount: spawned.lifeforce,
  });
  expect(carved.ok).toBe(true);
  return `fork:${forkId}`;
}

const forkContexts = once(async () => {
  const budgetId = await spawnedFork(
    'ctx-1',
    'fk-ctx',
    { kind: 'prompt', content: 'You are a gardener who varies ideas.' },
    { kind: 'context_replay', lastN: 2 },
  );
  await llm(['llm:fork/ctx-1/replay/', 'llm:fork/ctx-1/replay-rate/'], () =>
    acts.forkEvaluateContexts({ forkId: 'ctx-1', budgetId }),
  );
});

const forkAbstracts = once(async () => {
  const budgetId = await spawnedFork(
    'abs-1',
    'fk-abs',
    { kind: 'strategy', target: 'abstracts', strategy: 'recency' },
    { kind: 'abstracts_replay', lastN: 10, window: 5, judge: true },
  );
  await llm(['llm:fork/abs-1/judge/'], () => acts.forkEvaluateAbstracts({ forkId: 'abs-1', budgetId }));
});

/** Every path that runs the sandbox or calls a model, and its proof. */
const paths: Record<string, Scenario> = {
  // The sandbox.
  'sandbox workflows/agent-loop/effects.ts › runShell': shellCommand,
  'shell-effect activities/commands/shell.ts › shell': shellCommand,
  'shell-effect activities/commands/escalations.ts › designedToolRun': designedToolAction,
  'sandbox workflows/escalation.ts › EscalationRun.runApprovedShell': approvedShell,
  'sandbox workflows/escalation.ts › EscalationRun.testDesign': designRound,
  'sandbox workflows/tool-generation.ts › generate': generatedToolTests,
  'sandbox workflows/successor-fork.ts › evaluate': forkToolTests,
  // The models.
  'llm activities/tick/think.ts › askModel': think,
  'llm activities/tick/think.ts › probeLlm': probe,
  'llm activities/tick/reflexes.ts › askAll.ask': reflexes,
  'llm activities/reflexes/peers.ts › askPeerValidator': peerValidation,
  'llm activities/llm/index.ts › createLlmActivities.llmChat': bareChat,
  'llm activities/llm-task.ts › askOnce': llmTask,
  'llm activities/nerves.ts › askModel': nerve,
  'llm activities/tool-generation.ts › writeTool': writeTool,
  "llm activities/campaign-tasks.ts › 'llm.ask'.run": campaignTask,
  'llm activities/campaigns.ts › validateCheckpoint': checkpoint,
  'llm activities/oversight/graph.ts › subAgent': oversight,
  'llm activities/forks/evaluate-contexts.ts › rateReply': forkContexts,
  'llm activities/forks/evaluate-contexts.ts › replayTicks': forkContexts,
  'llm activities/forks/evaluate-abstracts.ts › judgeDigest': forkAbstracts,
};

/** The gates every path above goes through, and the one model call no agent makes. */
const gates = [
  // The router asks a model only after reserveCall held the call's worst case.
  'model activities/llm/router.ts › askRow',
  // A person's test of a catalogue model (`mindloop models test`, the notebook's Models page): no
  // agent asks it and no agent's budget pays; what it finds is stored on the catalogue entry.
  'model runtime/model-test.ts › runModelTest.ask',
  // The sandbox queue's activity: only the `sandbox` paths above schedule it.
  'engine activities/sandbox.ts › createSandboxActivities.sandboxRun',
];

// ---- the tests --------------------------------------------------------------------------------

let found: Site[] = [];

beforeAll(async () => {
  h = await migratedDatabase('charged_paths', 4);
  acts = createActivities({
    db: h.db,
    llm: { env: {}, toolsDir: repoToolsDir, scriptedReply: reply },
    toolGeneration: { mode: 'development', allowOverride: false },
    dataDir: data.path,
  });
  await createToolActivities({ db: h.db }).ensureBuiltinTools();
  await seedAgent('ada');
}, 60_000);

afterAll(async () => {
  await h?.dispose();
  data.remove();
});

describe('the paths that run the sandbox or call a model', () => {
  it('are all priced below: each one found in the code has a scenario, and each scenario a path', () => {
    found = scanPaths();
    const ids = found.map((s) => `${s.kind} ${s.id}`);
    expect(
      ids.filter((id) => !(id in paths) && !gates.includes(id)),
      'paths in the code with no scenario here: charge them, then prove it below',
    ).toEqual([]);
    expect(
      Object.keys(paths).filter((id) => !ids.includes(id)),
      'scenarios of paths no longer in the code',
    ).toEqual([]);
    expect(
      gates.filter((id) => !ids.includes(id)),
      'the gates',
    ).toEqual([]);
  }, 180_000);

  it('each model call names its idempotency key (a retry finds its hold instead of taking another)', () => {
    if (found.length === 0) found = scanPaths();
    const llmSites = found.filter((s) => s.kind === 'llm');
    expect(llmSites.length).toBeGreaterThan(10);
    expect(llmSites.filter((s) => !/\bidempotencyKey\b/.test(s.args)).map((s) => s.id)).toEqual([]);
  }, 180_000);
});

describe('each path moves the ledger once (real Postgres; workflows on the time-skipping server)', () => {
  const suite = timeSkippingSuite();
  let workers: RunningWorkers | undefined;
  beforeAll(async () => {
    [env, workflowBundle] = [suite.env, suite.bundle];
    workers = await startWorkers(env, [
      { taskQueue, workflowBundle, activities: acts },
      // The sandbox queue's own activity, on the local stand-in of the engine (Docker is not the point here).
      {
        taskQueue: 'sandbox',
        activities: createSandboxActivities({ docker: {} as never, sandbox: new LocalProcessSandbox() }),
      },
    ]);
  }, 180_000);
  afterAll(async () => {
    await workers?.stop();
  });

  it.each(Object.keys(paths))(
    '%s',
    async (id) => {
      await paths[id]!();
    },
    120_000,
  );
});
