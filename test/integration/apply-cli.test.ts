/**
 * `mindloop apply`, `mindloop agents export` and `mindloop models add` run as a user runs them
 * (child processes of bin/mindloop.mjs) against a real Temporal dev server, a worker on the
 * `mindloop` task queue running the product's workflows with the real activities, a migrated
 * Postgres, and a fake OpenAI-compatible server standing in for the hosted models:
 * - the three examples apply as they are: the researcher (its models added to the catalogue
 *   first, pointed at the fake) ticks through the fake with its validators assigned; the
 *   companion runs on the built-in `local` model; the peers folder makes two agents, each the
 *   other's peer;
 * - the same file again changes nothing; a dry run prints the diff and writes nothing; the
 *   changed file reaches the running loop through its update and the loop's pace changes;
 * - an agent that closes its own goal (its model's reply) keeps it against the old file (drift),
 *   a file changing that goal is refused unless --overwrite-drift;
 * - an exported file applies back as nothing to change;
 * - bad files are refused with exit 1, a message naming what is wrong, and nothing written.
 */
import { mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { and, count, desc, eq, gt } from 'drizzle-orm';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createActivities } from '../../activities/index.js';
import { renderCommandBlock } from '../../core/reply-parser.js';
import { workflowIds } from '../../core/ids.js';
import { agentFiles, agentPeers, agents, goals, llmCalls, llmRegistry } from '../../db/schema/index.js';
import { statusQuery } from '../../workflows/agent-loop/index.js';
import { migratedDatabase, repoToolsDir, tempDir, type MigratedDatabase } from '../helpers/env.js';
import {
  capabilityAnswer,
  chatCompletion,
  startFakeOpenAiServer,
  type FakeOpenAiServer,
} from '../helpers/fake-openai-server.js';
import { startWorkers, type RunningWorkers } from '../helpers/harness.js';
import { repoRoot, run, type Ran } from '../helpers/spawn.js';
import { startDevTemporal, type DevTemporal } from '../helpers/temporal.js';
import { readUntil, waitFor } from '../helpers/wait.js';

const cli = join(repoRoot, 'bin', 'mindloop.mjs');
const examples = join(repoRoot, 'examples');
const artifacts = join(repoRoot, 'test', 'artifacts', 'apply-cli');

let database: MigratedDatabase;
let temporal: DevTemporal;
let fake: FakeOpenAiServer;
let workers: RunningWorkers;
let tmp: { path: string; remove(): void };

/** While false, the fake answers `models add`'s test calls; then the agents' scripted replies. */
let agentsTalking = false;
/** The goal id drifter's next reply closes (once), set by the test. */
let closeGoal: number | undefined;

const promptOf = (body: Record<string, unknown>) =>
  ((body.messages as Array<{ content?: unknown }> | undefined) ?? [])
    .map((m) => (typeof m.content === 'string' ? m.content : JSON.stringify(m.content)))
    .join('\n');

/** The hosted models' replies: a validator's rating, the mini-prompts' answers, and each agent's thought. */
function answer(body: Record<string, unknown>) {
  if (!agentsTalking) return capabilityAnswer({ json: true, tools: true })(body);
  const prompt = promptOf(body);
  if (prompt.includes('Answer with ONE line: a rating')) return chatCompletion('+2 -- sourced and careful');
  if (prompt.includes('Name the emotions of the reply above')) return chatCompletion('calm:2 (steady work)');
  if (prompt.includes('Compare the NEW reply'))
    return chatCompletion('{"novelty": 60, "new": ["runtimes"], "tags": ["research"]}');
  if (prompt.includes('You are Drifter') && closeGoal !== undefined) {
    const id = closeGoal;
    closeGoal = undefined;
    return chatCompletion(
      `Ship v1 is done; I close it.\n${renderCommandBlock([{ cmdId: 'close-ship', type: 'goals.status', args: { id, status: 'completed' } }])}`,
    );
  }
  return chatCompletion('I list the candidate runtimes and note where each claim comes from.');
}

/** Every command and what it printed, written to test/artifacts/apply-cli/transcript.txt after the file. */
const transcript: string[] = [];

/** The CLI as a user's shell runs it, pointed at this test's stack. */
async function mindloop(...args: string[]): Promise<Ran> {
  const r = await run(process.execPath, [cli, ...args], {
    DATABASE_URL: database.url,
    TEMPORAL_ADDRESS: temporal.server.address,
    TEMPORAL_NAMESPACE: 'default',
    MINDLOOP_TOOLS_DIR: repoToolsDir,
    MINDLOOP_NOTEBOOK_PORT: 'off',
    NATS_URL: 'off',
  });
  transcript.push(
    `$ mindloop ${args.map((a) => a.replace(tmp.path, '$TMP')).join(' ')}\n${r.stdout}${r.stderr.slice(0, 2000)}(exit ${r.code})\n`,
  );
  return r;
}

/** A successful command's stdout (the failure shows stderr). */
async function ok(...args: string[]): Promise<string> {
  const r = await mindloop(...args);
  expect(r.code, `mindloop ${args.join(' ')}\n${r.stdout}\n${r.stderr}`).toBe(0);
  return r.stdout;
}

/** A refused command's stderr: exit 1. */
async function refused(...args: string[]): Promise<string> {
  const r = await mindloop(...args);
  expect(r.code, `mindloop ${args.join(' ')} should be refused\n${r.stdout}\n${r.stderr}`).toBe(1);
  return r.stderr;
}

const fileRows = async (agentId?: string) =>
  (
    await database.db
      .select({ n: count() })
      .from(agentFiles)
      .where(agentId ? eq(agentFiles.agentId, agentId) : undefined)
  )[0]!.n;
const agentRows = async () => (await database.db.select({ n: count() }).from(agents))[0]!.n;
const loop = (id: string) => temporal.client.workflow.getHandle(workflowIds.agent(id));
const status = (id: string) => loop(id).query(statusQuery);

/** Write a file under the test's temp dir; returns its path. */
function write(name: string, text: string | Buffer): string {
  const path = join(tmp.path, name);
  writeFileSync(path, text);
  return path;
}

beforeAll(async () => {
  [database, temporal, fake] = await Promise.all([
    migratedDatabase('mindloop_apply_cli', 8),
    startDevTemporal('apply-cli'),
    startFakeOpenAiServer({ models: [{ id: 'qwen2.5:7b', context_length: 32768 }, { id: 'llama3.2:3b' }], answer }),
  ]);
  tmp = tempDir('apply-cli');
  // One CPU thread for the offline model: the companion's and the peers' first ticks run on it
  // while the rest of the test goes on.
  const activities = createActivities({ db: database.db, llm: { env: {}, toolsDir: repoToolsDir, localThreads: 1 } });
  workers = await startWorkers(temporal, [{ taskQueue: 'mindloop', workflowBundle: temporal.bundle, activities }]);
}, 180_000);

afterAll(async () => {
  mkdirSync(artifacts, { recursive: true });
  writeFileSync(join(artifacts, 'transcript.txt'), transcript.join('\n'));
  // The loops stop first, so no activity is mid-flight when the worker goes.
  await Promise.allSettled(
    ['researcher', 'companion', 'ada', 'bo', 'drifter'].map((id) => loop(id).terminate('test over')),
  );
  await workers?.stop();
  await temporal?.stop();
  await fake?.close();
  await database?.dispose();
  tmp?.remove();
}, 120_000);

describe('mindloop apply on the real stack', () => {
  it('the researcher: its models added against the fake, then applied: created, validators assigned, ticking through the fake', async () => {
    const main = await ok(
      'models',
      'add',
      'research-main',
      '--provider',
      'openai',
      '--base-url',
      fake.baseUrl,
      '--model',
      'qwen2.5:7b',
    );
    expect(main).toMatch(
      /^added model research-main: openai qwen2\.5:7b at http:\/\/127\.0\.0\.1:\d+\/v1, role agent — ok in \d+ ms; JSON replies yes; tool calls yes; context 32768 tokens\n$/,
    );
    expect(
      await ok(
        'models',
        'add',
        'research-check',
        '--provider',
        'openai',
        '--base-url',
        fake.baseUrl,
        '--model',
        'llama3.2:3b',
        '--role',
        'validator',
      ),
    ).toContain('added model research-check: openai llama3.2:3b');
    agentsTalking = true;

    const applied = await ok('apply', '-f', 'examples/researcher.yaml');
    expect(applied).toContain('examples/researcher.yaml:');
    expect(applied).toMatch(/agent researcher: changes \(\d+\):/);
    expect(applied).toContain('created; its loop runs as agent/researcher');
    expect(await fileRows('researcher')).toBe(1);

    const registry = await database.db.select().from(llmRegistry).where(eq(llmRegistry.agentId, 'researcher'));
    const validators = registry.filter((r) => r.validator).map((r) => [r.modelName, r.trust]);
    expect(validators.sort()).toEqual([
      ['research-check', 1],
      ['research-main', 0.5],
    ]);
    expect(registry.find((r) => r.role === 'agent')).toMatchObject({
      modelName: 'research-main',
      baseUrl: fake.baseUrl,
      model: 'qwen2.5:7b',
    });

    // It thinks through the fake, and its validator there rates the reply.
    const calls = await waitFor('the researcher thinking and validated through the fake', 60_000, async () => {
      const rows = await database.db
        .select({ purpose: llmCalls.purpose, model: llmCalls.model, ok: llmCalls.ok })
        .from(llmCalls)
        .where(eq(llmCalls.agentId, 'researcher'));
      const think = rows.find((r) => r.purpose === 'think' && r.model === 'qwen2.5:7b' && r.ok);
      const check = rows.find((r) => r.purpose === 'validate' && r.model === 'llama3.2:3b' && r.ok);
      return think && check ? rows : undefined;
    });
    expect(calls.length).toBeGreaterThanOrEqual(2);
    expect(
      fake.chatRequests().some((q) => q.body.model === 'qwen2.5:7b' && promptOf(q.body).includes('You are Researcher')),
    ).toBe(true);

    const shown = await ok('status', 'researcher', '--direct');
    expect(shown).toMatch(/^agent researcher — tick \d+, /);
    expect(shown).toContain('delay 5000 ms');
  }, 120_000);

  it('the companion: created on the built-in local model, its loop running', async () => {
    const applied = await ok('apply', '-f', 'examples/companion.yaml');
    expect(applied).toContain('created; its loop runs as agent/companion');
    const [row] = await database.db
      .select()
      .from(llmRegistry)
      .where(and(eq(llmRegistry.agentId, 'companion'), eq(llmRegistry.role, 'agent')));
    expect(row).toMatchObject({ provider: 'local', modelName: 'local' });
    // The status query answers (a tick on the offline model is not waited for: it may take long on a busy CPU).
    const s = await readUntil(
      'the companion loop past its start',
      30_000,
      () => status('companion'),
      (v) => v.phase !== 'starting',
    );
    expect(s.agentId).toBe('companion');
    // Idle mode from the file, read by the loop at its start.
    expect(s.settings).toMatchObject({ delayMs: 2000, idle: { on: true, wakeOn: ['note'] } });
    expect(await ok('status', 'companion', '--direct')).toMatch(/^agent companion — tick \d+, .*idle until note/s);
  }, 60_000);

  it("the peers folder: both agents created, each the other's peer, both loops running", async () => {
    const applied = await ok('apply', '-f', 'examples/peers');
    expect(applied).toContain('examples/peers/ada.yaml:');
    expect(applied).toContain('examples/peers/bo.yaml:');
    expect(applied).toContain('created; its loop runs as agent/ada');
    expect(applied).toContain('created; its loop runs as agent/bo');
    const links = await database.db
      .select({ from: agentPeers.agentId, to: agentPeers.peerAgentId, notes: agentPeers.notes })
      .from(agentPeers);
    expect(links.sort((a, b) => a.from.localeCompare(b.from))).toEqual([
      { from: 'ada', to: 'bo', notes: 'my reviewer' },
      { from: 'bo', to: 'ada', notes: 'the inventor I review for' },
    ]);
    for (const id of ['ada', 'bo'])
      expect((await waitFor(`${id}'s loop answering`, 30_000, () => status(id))).agentId).toBe(id);
  }, 60_000);

  it('the same file again changes nothing; a dry run of a changed file prints the diff and writes nothing; applied, the running loop takes it', async () => {
    const again = await ok('apply', '-f', 'examples/researcher.yaml');
    expect(again).toContain('nothing to change');
    expect(again).toContain('unchanged');
    expect(await fileRows('researcher')).toBe(1);

    const changed = write(
      'researcher.yaml',
      readFileSync(join(examples, 'researcher.yaml'), 'utf8')
        .replace('delayMs: 5000', 'delayMs: 7000')
        .replace('priority: 3', 'priority: 4'),
    );
    const dry = await ok('apply', '-f', changed, '--dry-run');
    expect(dry).toContain('agent researcher: changes (2):');
    expect(dry).toContain('~ pace.delayMs: 5000 → 7000');
    expect(dry).toMatch(/~ goals\["Survey durable agent runtimes"\]: priority: 3 → 4/);
    expect(dry).toContain('(dry run: nothing written)');
    expect(await fileRows('researcher')).toBe(1);
    expect((await status('researcher')).settings.delayMs).toBe(5000);

    const update = await ok('apply', '-f', changed);
    expect(update).toContain('~ pace.delayMs: 5000 → 7000');
    expect(update).toMatch(/applied \(agent_files #\d+\)/);
    expect(await fileRows('researcher')).toBe(2);
    const [goal] = await database.db.select().from(goals).where(eq(goals.agentId, 'researcher'));
    expect(goal!.priority).toBe(4);
    // Through the loop's update: the pace is in force at once.
    expect((await status('researcher')).settings.delayMs).toBe(7000);
    expect(await ok('status', 'researcher', '--direct')).toContain('delay 7000 ms');
  }, 90_000);

  it('drift: the agent closes its own goal; the old file keeps it; a file changing that goal is refused unless --overwrite-drift', async () => {
    const file = write(
      'drifter.yaml',
      `id: drifter
name: Drifter
systemPrompt:
  short: You are Drifter. Close what you finished.
goals:
  - title: Ship v1
    priority: 2
models:
  agent: research-main
pace:
  delayMs: 500
`,
    );
    expect(await ok('apply', '-f', file)).toContain('created; its loop runs as agent/drifter');
    const [ship] = await database.db.select().from(goals).where(eq(goals.agentId, 'drifter'));
    // Its model's next reply closes the goal: the agent's own change, through its commands.
    closeGoal = ship!.id;
    await waitFor('drifter closing its goal', 60_000, async () => {
      const [g] = await database.db.select().from(goals).where(eq(goals.id, ship!.id));
      return g!.status === 'completed' ? g : undefined;
    });
    const before = await fileRows('drifter');

    const old = await ok('apply', '-f', file);
    expect(old).toContain("drift: the agent's own changes since the last apply, kept");
    expect(old).toContain('~ goals["Ship v1"]: status: "active" → "completed"');
    expect((await database.db.select().from(goals).where(eq(goals.id, ship!.id)))[0]!.status).toBe('completed');
    // The same file as the last one applied: not even a row.
    expect(await fileRows('drifter')).toBe(before);

    const edited = write(
      'drifter-edited.yaml',
      readFileSync(file, 'utf8').replace('priority: 2', 'priority: 2\n    description: Ship it by Friday.'),
    );
    const conflict = await refused('apply', '-f', edited);
    expect(conflict).toContain('it changes what the agent changed itself since the last apply');
    expect(conflict).toContain('pass --overwrite-drift');
    expect(await fileRows('drifter')).toBe(before);
    expect((await database.db.select().from(goals).where(eq(goals.id, ship!.id)))[0]).toMatchObject({
      status: 'completed',
      description: null,
    });

    const overwritten = await ok('apply', '-f', edited, '--overwrite-drift');
    expect(overwritten).toMatch(/applied \(agent_files #\d+\)/);
    expect(overwritten).toContain('the file wins (--overwrite-drift)');
    expect(await fileRows('drifter')).toBe(before + 1);
    // The file's goal as a whole: its description, and its status (active) back.
    expect((await database.db.select().from(goals).where(eq(goals.id, ship!.id)))[0]).toMatchObject({
      status: 'active',
      description: 'Ship it by Friday.',
    });
  }, 120_000);

  it('an exported agent applies back as nothing to change', async () => {
    for (const id of ['researcher', 'drifter']) {
      // A running loop keeps learning (a validator's trust moves with each rating): paused, the
      // export is what the agent is when it is applied back.
      expect(await ok('pause', id)).toContain('pause: sent');
      await waitFor(`${id} paused`, 30_000, async () => ((await status(id)).phase === 'paused' ? true : undefined));
      const out = join(tmp.path, `${id}-export.yaml`);
      expect(await ok('agents', 'export', id, '-o', out)).toBe(`agent ${id} written to ${out}\n`);
      const [last] = await database.db
        .select({ id: agentFiles.id })
        .from(agentFiles)
        .where(eq(agentFiles.agentId, id))
        .orderBy(desc(agentFiles.id))
        .limit(1);
      const back = await ok('apply', '-f', out);
      expect(back).toContain(`agent ${id}: nothing to change`);
      expect(back).toContain('unchanged');
      // An export that differs from the last file applied (it states every field) is recorded,
      // with nothing written, as the base the next apply compares with; applied again, not even that.
      const recorded = await database.db
        .select({ diff: agentFiles.diff })
        .from(agentFiles)
        .where(and(eq(agentFiles.agentId, id), gt(agentFiles.id, last!.id)));
      expect(recorded.length).toBeLessThanOrEqual(1);
      expect(recorded.flatMap((r) => r.diff)).toEqual([]);
      const settled = await fileRows(id);
      expect(await ok('apply', '-f', out)).toContain(`agent ${id}: nothing to change`);
      expect(await fileRows(id)).toBe(settled);
      await ok('resume', id);
    }
  }, 90_000);

  it('bad files: each refused with exit 1 and a clear message, nothing written', async () => {
    // An agent in this database that no loop of this deployment runs and no file applied here:
    // another deployment's (the row stands in for what that deployment wrote).
    await database.db.insert(agents).values({ id: 'elsewhere', name: 'Elsewhere' });
    const [files, agentCount] = [await fileRows(), await agentRows()];
    const key = 'sk-proj-abcdefghijklmnopqrstuvwxyz0123456789';
    const bomb = [
      'a: &a ["x","x","x","x","x","x","x","x","x","x"]',
      ...Array.from(
        { length: 8 },
        (_, i) =>
          `${String.fromCharCode(98 + i)}: &${String.fromCharCode(98 + i)} [${Array(10)
            .fill(`*${String.fromCharCode(97 + i)}`)
            .join(',')}]`,
      ),
      'id: bomb',
    ].join('\n');
    const cases: Array<[string, string | Buffer, RegExp | string]> = [
      [
        'unknown-key.yaml',
        'id: typo\nsytemPrompt:\n  short: hi\n',
        "sytemPrompt: unknown key (did you mean 'systemPrompt'?)",
      ],
      ['wrong-type.yaml', 'id: typed\ngoals:\n  - title: A\n    priority: high\n', 'goals[0].priority'],
      ['unknown-model.yaml', 'id: modelless\nmodels:\n  agent: gpt-nowhere\n', 'gpt-nowhere'],
      ['secret.yaml', `id: leaky\ndescription: ${key}\n`, /secret|key/i],
      ['huge.yaml', Buffer.alloc(10 * 1024 * 1024, 'a'), 'an agent file may be at most'],
      ['bomb.yaml', bomb, /alias/i],
      [
        'elsewhere.yaml',
        'id: elsewhere\nname: Elsewhere\n',
        'agent elsewhere exists in the database but not in this deployment',
      ],
    ];
    for (const [name, text, message] of cases) {
      const err = await refused('apply', '-f', write(name, text));
      expect(err, name).toMatch(name === 'elsewhere.yaml' ? /^mindloop: / : /^mindloop: nothing was applied:\n/);
      if (typeof message === 'string') expect(err, name).toContain(message);
      else expect(err, name).toMatch(message);
      expect(err, name).not.toContain(key);
    }
    expect(await fileRows()).toBe(files);
    expect(await agentRows()).toBe(agentCount);
    await expect(loop('elsewhere').describe()).rejects.toThrow();
  }, 120_000);
});
