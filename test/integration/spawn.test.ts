/**
 * Descendants end to end, on the real Temporal dev server and the real Postgres:
 * - an agent loop's `spawn` command (scripted model) gives birth to a clone that runs its own
 *   loop, and the parent reads the note;
 * - a worker process SIGKILLed while the copy is in flight (held mid-way by a lock on one of
 *   the tables): nothing of the child exists meanwhile, and once a new worker is up there is
 *   exactly one complete child, running;
 * - `mindloop agents spawn` shows the phases and the outcome (and refusals: a taken name, a
 *   limit a person lowered with `mindloop agents limits`), `mindloop agents tree` the lineage;
 *   bad flags are usage errors naming the flag.
 */
import type { Client } from '@temporalio/client';
import { NativeConnection } from '@temporalio/worker';
import { and, eq, like } from 'drizzle-orm';
import pg from 'pg';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createActivities } from '../../activities/index.js';
import { workflowIds } from '../../core/ids.js';
import { renderCommandBlock } from '../../core/reply-parser.js';
import { spawnCopyTables } from '../../db/queries/spawns.js';
import { agentConfig, agents, llmRegistry, notes, spawns } from '../../db/schema/index.js';
import { startSpawn } from '../../runtime/workflow-starts.js';
import { repoToolsDir } from '../helpers/env.js';
import { startLoop, withWorker } from '../helpers/harness.js';
import { thinkScript } from '../helpers/scripted.js';
import { rowCounts, seedParent } from '../helpers/society.js';
import { repoRoot, run } from '../helpers/spawn.js';
import { sleep, startKillableStack, waitFor, type KillableStack } from '../helpers/worker-process.js';

let ks: KillableStack;
let client: Client;
let connection: NativeConnection;

beforeAll(async () => {
  ks = await startKillableStack('spawn');
  client = ks.client;
  connection = await NativeConnection.connect(ks.stack.temporal.connection);
}, 180_000);
afterAll(async () => {
  await connection?.close();
  await ks?.stop();
});

const db = () => ks.stack.db.db;
const cli = `${repoRoot}/bin/mindloop.mjs`;
const ml = (...args: string[]) =>
  run(
    process.execPath,
    [cli, ...args],
    { TEMPORAL_ADDRESS: ks.stack.temporal.address, DATABASE_URL: ks.dbUrl },
    120_000,
  );
const status = async (workflowId: string) => (await client.workflow.getHandle(workflowId).describe()).status.name;
const stopLoops = (...ids: string[]) =>
  Promise.all(
    ids.map((id) =>
      client.workflow
        .getHandle(workflowIds.agent(id))
        .terminate('test over')
        .catch(() => undefined),
    ),
  );

describe('the spawn command in a running agent loop', () => {
  it('the scripted agent spawns a clone: the clone runs its own loop and the parent reads how it went', async () => {
    await db().insert(agents).values({ id: 'mother', name: 'mother' });
    const [row] = await db()
      .insert(llmRegistry)
      .values({
        agentId: 'mother',
        name: 'mind',
        provider: 'scripted',
        model: 'scripted-mother',
        role: 'agent',
        priority: 1,
      })
      .returning({ id: llmRegistry.id });
    await db().insert(agentConfig).values({ agentId: 'mother', key: 'delay_ms', value: 500 });
    const spawnReply = `I will have a daughter.\n${renderCommandBlock([{ cmdId: 's1', type: 'spawn', args: { type: 'clone', name: 'daughter', goals: ['tend the bees'] } }])}`;
    const script = thinkScript((_m, i, call) =>
      call.registryId === row!.id && i === 0 ? spawnReply : 'Thinking quietly.',
    );
    const taskQueue = 'spawn-loop';
    const spec = {
      taskQueue,
      workflowBundle: { codePath: ks.bundlePath },
      activities: createActivities({ db: db(), llm: { env: {}, toolsDir: repoToolsDir, scriptedReply: script } }),
    };
    await withWorker(connection, spec, async () => {
      const mother = await startLoop(client, taskQueue, { agentId: 'mother', reflexes: false });
      const spawn = client.workflow.getHandle(workflowIds.spawn('mother', 'daughter'));
      const result = await waitFor('the spawn workflow', 60_000, async () => spawn.result());
      expect(result).toMatchObject({
        parentId: 'mother',
        childId: 'daughter',
        type: 'clone',
        status: 'running',
        generation: 1,
        budget: null,
      });
      const described = await spawn.describe();
      expect(described.parentExecution?.workflowId).toBe(workflowIds.agent('mother'));
      expect(await described.staticSummary()).toBe('spawn of mother: clone daughter');
      // Its own loop, running on after the spawn completed; it thinks with its copy of the model.
      expect(await status(workflowIds.agent('daughter'))).toBe('RUNNING');
      await waitFor('the daughter to tick', 60_000, async () =>
        (await db().select().from(agents).where(eq(agents.id, 'daughter')))[0]?.status === 'running' ? true : undefined,
      );
      const [daughter] = await db().select().from(agents).where(eq(agents.id, 'daughter'));
      expect(daughter).toMatchObject({ parentId: 'mother', kind: 'clone', generation: 1 });
      // The parent was woken and read the note.
      const note = await waitFor('the note read', 60_000, async () => {
        const [n] = await db()
          .select()
          .from(notes)
          .where(and(eq(notes.agentId, 'mother'), like(notes.sender, 'spawn:%')));
        return n?.readAt ? n : undefined;
      });
      expect(note.text).toMatch(/Your clone descendant daughter \(generation 1\) is born/);
      await mother.signal('stop');
      await mother.result();
      await stopLoops('daughter');
    });
  }, 120_000);
});

describe('a worker killed mid-copy', () => {
  it('leaves no child while the copy is in flight, then exactly one complete child once a new worker is up', async () => {
    await seedParent(db(), 'kp', { filler: 2000 });
    const parentCounts = await rowCounts(db(), 'kp');
    // Holds the copy mid-way: the rows before `links` are inserted (uncommitted), `links` waits.
    const locker = new pg.Client({ connectionString: ks.dbUrl });
    await locker.connect();
    let worker = ks.spawnWorker();
    try {
      await locker.query('begin');
      await locker.query('lock table links in share mode');
      const h = await startSpawn(client, { parentId: 'kp', type: 'clone', name: 'kc' });
      // (Asked on another connection: a transaction sees pg_stat_activity as it was at its first look.)
      const backends = async (where: string) =>
        Number(
          (await ks.stack.db.pool.query(`select count(*)::int as n from pg_stat_activity where ${where}`)).rows[0].n,
        );
      await waitFor('the copy to wait on links', 60_000, async () =>
        (await backends(`wait_event_type = 'Lock' and query like 'insert into "links"%'`)) > 0 ? true : undefined,
      );
      // Mid-copy: the diary is inserted in the copy's transaction, nothing is visible outside it.
      expect(Object.values(await rowCounts(db(), 'kc')).reduce((a, b) => a + b, 0)).toBe(0);
      expect(await db().select().from(agents).where(eq(agents.id, 'kc'))).toEqual([]);
      expect((await db().select().from(spawns).where(eq(spawns.childAgentId, 'kc')))[0]?.status).toBe('copying');

      worker.kill('SIGKILL');
      await new Promise((r) =>
        worker.exitCode !== null || worker.signalCode !== null ? r(null) : worker.once('exit', r),
      );
      await locker.query('rollback');
      // The dead worker's transaction never commits: its backend ends without a commit.
      await waitFor('the dead copy to end', 30_000, async () =>
        (await backends(`query like 'insert into "links"%' and state <> 'idle'`)) === 0 ? true : undefined,
      );
      await sleep(200);
      expect(Object.values(await rowCounts(db(), 'kc')).reduce((a, b) => a + b, 0)).toBe(0);
      expect(await db().select().from(agents).where(eq(agents.id, 'kc'))).toEqual([]);

      worker = ks.spawnWorker();
      const result = await h.result();
      expect(result).toMatchObject({ childId: 'kc', status: 'running', type: 'clone' });
      expect(await db().select({ id: agents.id }).from(agents).where(like(agents.id, 'kc%'))).toEqual([{ id: 'kc' }]);
      // Every table copied once, in full (what the child's own loop writes since comes on top).
      const copied = Object.fromEntries(spawnCopyTables('clone').map((t) => [t, parentCounts[t]]));
      expect(result.copied).toEqual(copied);
      expect(result.rows).toBe(Object.values(copied).reduce((a, b) => a! + b!, 0));
      const now = await rowCounts(db(), 'kc');
      for (const t of [
        'diary_entries',
        'llm_memory',
        'concepts',
        'links',
        'goals',
        'ethics_policies',
        'abstracts',
        'escalations',
        'campaigns',
      ])
        expect([t, now[t]]).toEqual([t, parentCounts[t]]);
      expect(now.agent_peers).toBe(parentCounts.agent_peers! + 1);
      expect(await status(workflowIds.agent('kc'))).toBe('RUNNING');

      // The CLI against the same stack: a newborn with its phases, a refusal, the lineage.
      const born = await ml(
        'agents',
        'spawn',
        'kp',
        '--type',
        'newborn',
        '--name',
        'kn',
        '--goal',
        'count the hives',
        '--budget',
        '25',
      );
      expect(born.code, born.stderr).toBe(0);
      expect(born.stdout).toMatch(/^spawn agent\/kp\/spawn\/kn: newborn kn of kp$/m);
      expect(born.stdout).toMatch(/^ {2}(admitting|copying|funding|starting)$/m);
      expect(born.stdout).toMatch(
        /kn is born: newborn, generation 1, \d+ rows inherited in \d+ ms, 25 LF; its loop runs as agent\/kn/,
      );
      const again = await ml('agents', 'spawn', 'kp', '--type', 'trained', '--name', 'kc');
      expect(again.code, again.stdout + again.stderr).toBe(1);
      expect(again.stdout).toMatch(/kc was refused: name taken: kc is already your descendant \(spawn running\)/);
      const tree = await ml('agents', 'tree', 'kc');
      expect(tree.code, tree.stderr).toBe(0);
      expect(tree.stdout.trim().split('\n')).toEqual([
        'kp (root, generation 0, created)',
        '└─ * kc (clone, generation 1, running)',
        '     (no descendants)',
      ]);
      const down = await ml('agents', 'tree', 'kp', '--json');
      const lineage = JSON.parse(down.stdout) as {
        descendants: Array<{ id: string; kind: string; generation: number; spawn: { status: string } }>;
      };
      expect(lineage.descendants.map((d) => [d.id, d.kind, d.generation, d.spawn.status])).toEqual([
        ['kc', 'clone', 1, 'running'],
        ['kn', 'newborn', 1, 'running'],
      ]);
      // A person lowers the limit: the next child is refused, naming it.
      const limits = await ml('agents', 'limits', 'kp', '--max-descendants', '2');
      expect(limits.code, limits.stderr).toBe(0);
      expect(limits.stdout.trim()).toBe('kp: 2 of at most 2 descendants; at most 5 per generation (generation 1: 2)');
      const over = await ml('agents', 'spawn', 'kp', '--type', 'newborn', '--name', 'k3');
      expect(over.code).toBe(1);
      expect(over.stdout).toMatch(
        /k3 was refused: limit: kp has 2 descendants and may have at most 2 \(config max_descendants\)/,
      );
      await stopLoops('kc', 'kn');
    } finally {
      await locker.end().catch(() => undefined);
      if (worker.exitCode === null) worker.kill('SIGKILL');
    }
  }, 180_000);
});

describe('mindloop agents: bad flags', () => {
  it.each([
    [
      ['agents', 'spawn', 'kp', '--type', 'twin', '--name', 'x'],
      /--type must be one of clone, trained, newborn, got "twin"/,
    ],
    [
      ['agents', 'spawn', 'kp', '--type', 'clone', '--name', 'a b'],
      /bad --name "a b": a name that becomes the child's id/,
    ],
    [
      ['agents', 'spawn', 'kp', '--type', 'clone', '--name', 'x', '--budget', '-3'],
      /--budget must be a positive number of LF, got "-3"/,
    ],
    [['agents', 'spawn', 'kp', '--type', 'clone'], /required option '--name <name>' not specified/],
    [['agents', 'spawn', 'bad/id', '--type', 'clone', '--name', 'x'], /bad agent id "bad\/id"/],
    [['agents', 'tree'], /missing required argument 'agent'/],
    [
      ['agents', 'limits', 'kp', '--max-descendants', '-1'],
      /--max-descendants must be an integer in 0..10000, got "-1"/,
    ],
  ])('%j', async (args, message) => {
    const r = await run(process.execPath, [cli, ...args], {}, 60_000);
    expect(r.code).toBe(2);
    expect(r.stderr).toMatch(message);
  });
});
