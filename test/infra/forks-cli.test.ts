/**
 * `mindloop forks list|show` as processes against the real Postgres (a fork made by the real
 * activities), and wrong flags / ids / unknown forks failing with a clear message.
 * (approve/reject/demo need Temporal: they run as processes against the dev server in
 * test/integration/forks-e2e.test.ts.)
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createForkActivities } from '../../activities/forks/index.js';
import { migratedDatabase, type MigratedDatabase, tempDir } from '../helpers/env.js';
import { seedForkableAgent } from '../helpers/fork-fixture.js';
import { repoRoot, run } from '../helpers/spawn.js';

const cli = `${repoRoot}/bin/mindloop.mjs`;
let h: MigratedDatabase;
let url: string;
const dir = tempDir('forks-cli');

beforeAll(async () => {
  h = await migratedDatabase('mindloop_forks_cli', 2);
  url = h.url;
  await seedForkableAgent(h.db, 'ada');
  const acts = createForkActivities({ db: h.db, dataDir: dir.path });
  await acts.forkSpawn({
    forkId: 'f1',
    workflowId: 'fork/f1',
    agentId: 'ada',
    patch: { kind: 'strategy', target: 'abstracts', strategy: 'keyword_cluster' },
    evaluation: { kind: 'abstracts_replay', lastN: 30, window: 10, judge: false },
    budget: { wallMs: 60_000, costUsd: 1, diskBytes: 1 << 30, cpus: 1 },
    startedAtMs: Date.now(),
  });
  await acts.forkApplyPatch({ forkId: 'f1' });
  const ev = await acts.forkEvaluateAbstracts({ forkId: 'f1' });
  await acts.forkRecordVerdict({
    forkId: 'f1',
    decision: {
      verdict: 'NEEDS_REVISION',
      confidence: 0.5,
      summary: `manual: ${ev.samples} windows`,
      caveats: ['cli test'],
    },
    artifacts: [ev.artifact],
    status: 'completed',
  });
  await acts.forkCleanup({ forkId: 'f1' });
}, 60_000);
afterAll(async () => {
  await h?.dispose();
  dir.remove();
});

const ml = (...args: string[]) => run(process.execPath, [cli, ...args], { DATABASE_URL: url });

describe('mindloop forks', () => {
  it('list and show print the fork, its verdict and artifacts', async () => {
    const list = await ml('forks', 'list', '--agent', 'ada');
    expect(list.code, list.stderr).toBe(0);
    expect(list.stdout).toMatch(/^f1\s+ada\s+completed\s+NEEDS_REVISION\s+0\.50\s+-\s+strategy\s+[0-9a-f]{12}$/m);
    const json = JSON.parse((await ml('forks', 'list', '--json')).stdout) as Array<{ id: string; verdict: string }>;
    expect(json.map((r) => [r.id, r.verdict])).toEqual([['f1', 'NEEDS_REVISION']]);

    const show = await ml('forks', 'show', 'f1');
    expect(show.code, show.stderr).toBe(0);
    expect(show.stdout).toContain('fork f1 of agent ada — completed');
    expect(show.stdout).toContain('verdict      NEEDS_REVISION (confidence 0.5), not applied');
    expect(show.stdout).toContain('caveat       cli test');
    expect(show.stdout).toMatch(/artifact {5}evaluation\.json {2}\d+ B {2}sha256 [0-9a-f]{16}…/);
    expect(show.stdout).toMatch(/artifact {5}verdict\.json/);
    expect(show.stdout).toMatch(/cleaned {6}\d{4}-/);
  });

  it('wrong flags and ids fail with the reason', async () => {
    const limit = await ml('forks', 'list', '--limit', '0');
    expect(limit.code).toBe(2);
    expect(limit.stderr).toContain('--limit must be an integer in 1..1000, got "0"');
    const badId = await ml('forks', 'show', 'bad/id');
    expect(badId.code).toBe(2);
    expect(badId.stderr).toContain('bad fork id "bad/id"');
    const missing = await ml('forks', 'show', 'nope');
    expect(missing.code).toBe(1);
    expect(missing.stderr).toContain('no fork nope (see `mindloop forks list`)');
    const noArg = await ml('forks', 'approve');
    expect(noArg.code).toBe(2);
    expect(noArg.stderr).toContain("missing required argument 'id'");
  });
});
