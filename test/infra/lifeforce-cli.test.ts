/**
 * `mindloop lifeforce show|grant|set` run as processes against the real Postgres: settings and
 * grants land in the budget row and the ledger, `show` prints the budget, its ledger and its
 * child budgets (and the same as JSON), bad values exit with the flag named and write nothing.
 * TEMPORAL_ADDRESS points at a port nobody listens on: the change is stored all the same and
 * the CLI says the loop was not woken (the signal itself is sent by the same client code as
 * `mindloop pause`).
 */
import { asc, eq } from 'drizzle-orm';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { defaultPrices, lfRound, llmWorstCase, thinkReservation } from '../../core/lifeforce.js';
import { carveBudget, closeBudget, release, reserve, settle } from '../../db/queries/lifeforce.js';
import { thinkBasis } from '../../db/queries/think-basis.js';
import {
  agentConfig,
  agents,
  lifeforceBudgets,
  lifeforceLedger,
  llmRegistry,
  tickPrompts,
} from '../../db/schema/index.js';
import { freePort, migratedDatabase, type MigratedDatabase } from '../helpers/env.js';
import { repoRoot, run } from '../helpers/spawn.js';

const cli = `${repoRoot}/bin/mindloop.mjs`;
let h: MigratedDatabase;
let temporalAddress: string;

beforeAll(async () => {
  h = await migratedDatabase('mindloop_lifeforce_cli', 2);
  await h.db.insert(agents).values([
    { id: 'ada', name: 'Ada' },
    { id: 'bo', name: 'Bo' },
  ]);
  temporalAddress = `127.0.0.1:${await freePort()}`;
}, 60_000);
afterAll(async () => {
  await h?.dispose();
});

const ml = (...args: string[]) =>
  run(process.execPath, [cli, ...args], { DATABASE_URL: h.url, TEMPORAL_ADDRESS: temporalAddress });
const budget = async (id: string) => (await h.db.select().from(lifeforceBudgets).where(eq(lifeforceBudgets.id, id)))[0];
const ledger = (budgetId: string) =>
  h.db.select().from(lifeforceLedger).where(eq(lifeforceLedger.budgetId, budgetId)).orderBy(asc(lifeforceLedger.id));

describe('mindloop lifeforce', () => {
  it('show: an unknown agent, or one with no budget yet, is a clear error', async () => {
    const unknown = await ml('lifeforce', 'nobody');
    expect(unknown.code).toBe(1);
    expect(unknown.stderr).toContain("no agent 'nobody'");
    const none = await ml('lifeforce', 'show', 'ada');
    expect(none.code).toBe(1);
    expect(none.stderr).toContain('agent ada has no lifeforce budget yet');
    const grant = await ml('lifeforce', 'grant', 'ada', '10');
    expect(grant.code).toBe(1);
    expect(grant.stderr).toContain('agent ada has no lifeforce budget yet');
    expect(await budget('agent:ada')).toBeUndefined();
  });

  it('set: capacity, regeneration, envelopes, policy and priority; stored though the loop is not woken', async () => {
    const r = await ml(
      'lifeforce',
      'set',
      'ada',
      '--capacity',
      '100',
      '--regen',
      '5',
      '--daily',
      '50',
      '--monthly',
      '1000',
      '--on-exhausted',
      'escalate',
      '--ask-for',
      '200',
      '--priority',
      '2',
    );
    expect(r.code, r.stderr).toBe(0);
    // Ada has no model: a think reserves nothing, nothing to warn about.
    expect(r.stderr).not.toContain('warning');
    expect(r.stdout).toContain(
      'set agent:ada: capacity 100 LF, regeneration 5 LF per hour, daily 50 LF, monthly 1000 LF, on exhausted escalate (asks for 200 LF), priority 2',
    );
    expect(r.stderr).toContain(`agent ada not signalled (cannot reach Temporal at ${temporalAddress}`);
    expect(r.stderr).toContain('the change is stored all the same');
    expect(await budget('agent:ada')).toMatchObject({
      capacity: 100,
      balance: 100,
      funded: 100,
      spent: 0,
      regenPerHour: 5,
      dailyLimit: 50,
      monthlyLimit: 1000,
      onExhausted: 'escalate',
      askFor: 200,
      priority: 2,
    });

    const again = await ml(
      'lifeforce',
      'set',
      'ada',
      '--daily',
      'none',
      '--priority',
      'auto',
      '--on-exhausted',
      'pause',
    );
    expect(again.code, again.stderr).toBe(0);
    expect(await budget('agent:ada')).toMatchObject({
      capacity: 100,
      dailyLimit: null,
      monthlyLimit: 1000,
      onExhausted: 'pause',
      priority: null,
    });
    expect((await ledger('agent:ada')).map((e) => [e.kind, e.amount])).toEqual([['grant', 100]]);
  }, 30_000);

  it('grant: the balance grows by the amount, one ledger row with the reason and who; --budget grants to a child', async () => {
    const r = await ml('lifeforce', 'grant', 'ada', '25.5', '--reason', 'more work', '--by', 'dafit');
    expect(r.code, r.stderr).toBe(0);
    expect(r.stdout).toContain('granted 25.5 LF to agent:ada (by dafit): available now 125.5 LF');
    expect(r.stderr).toContain('agent ada not signalled');
    expect(await budget('agent:ada')).toMatchObject({ balance: 125.5, funded: 125.5 });
    const grants = (await ledger('agent:ada')).filter((e) => e.kind === 'grant');
    expect(grants).toHaveLength(2);
    expect(grants[1]).toMatchObject({ amount: 25.5, reason: 'more work', metadata: { by: 'dafit' } });
    expect(grants[1]!.idempotencyKey).toMatch(/^cli:[0-9a-f-]{36}$/);

    const carved = await carveBudget(h.db, {
      parentId: 'agent:ada',
      id: 'task:ada/1',
      agentId: 'ada',
      scope: 'task',
      amount: 20,
    });
    expect(carved.ok).toBe(true);
    const child = await ml('lifeforce', 'grant', 'ada', '5', '--budget', 'task:ada/1');
    expect(child.code, child.stderr).toBe(0);
    expect(await budget('task:ada/1')).toMatchObject({ balance: 25, funded: 25 });
    const other = await ml('lifeforce', 'grant', 'bo', '5', '--budget', 'task:ada/1');
    expect(other.code).toBe(1);
    expect(other.stderr).toContain('budget task:ada/1 belongs to agent ada, not bo');
  }, 30_000);

  it('show: the budget, burn rate, last ledger entries and child budgets; --json the same as JSON', async () => {
    const held = await reserve(h.db, {
      key: 'op-1',
      budgetId: 'agent:ada',
      amount: 10,
      operation: 'llm_call',
      ttlMs: 60_000,
      reason: 'think',
    });
    expect(held.ok).toBe(true);
    await settle(h.db, 'op-1', 4, { callId: 1 });
    await reserve(h.db, { key: 'op-2', budgetId: 'agent:ada', amount: 3, operation: 'sandbox', ttlMs: 60_000 });
    await carveBudget(h.db, { parentId: 'agent:ada', id: 'fork:f1', agentId: 'ada', scope: 'fork', amount: 10 });
    await closeBudget(h.db, 'fork:f1', 'evaluated');

    const r = await ml('lifeforce', 'ada');
    expect(r.code, r.stderr).toBe(0);
    const text = r.stdout;
    expect(text).toContain('lifeforce of agent ada — budget agent:ada');
    expect(text).toMatch(/capacity {6}100 LF/);
    // 125.5 funded − 20 carved to task:ada/1 − 4 spent − 3 reserved (fork:f1 spent nothing and gave its 10 back).
    expect(text).toMatch(/available {5}98\.5 LF/);
    expect(text).toMatch(/reserved {6}23 LF/);
    expect(text).toMatch(/spent {9}4 LF \(funded 125\.5 LF\)/);
    expect(text).toMatch(/regeneration {2}5 LF per hour/);
    expect(text).toMatch(/daily {9}no limit/);
    expect(text).toMatch(/monthly {7}\d+(\.\d+)? LF used of 1000 LF \(\d{4}-\d{2}\)/);
    expect(text).toMatch(/burn rate {5}4 LF per hour/);
    expect(text).toMatch(/exhaustion {4}never/);
    expect(text).toMatch(/on exhausted {2}pause/);
    expect(text).toMatch(/priority {6}auto/);
    expect(text).toMatch(/exhausted {5}no/);
    expect(text).toMatch(/last \d+ ledger entries \(newest first\):\n {2}time +kind +amount +operation +reason/);
    expect(text).toMatch(/^ {2}\S+Z +settle +4 LF +llm_call +-$/m);
    expect(text).toMatch(/^ {2}\S+Z +reserve +10 LF +llm_call +think$/m);
    expect(text).toMatch(/^ {2}\S+Z +grant +25\.5 LF +- +more work$/m);
    expect(text).toContain('child budgets (2):');
    expect(text).toMatch(/^ {2}task:ada\/1 +task +20 LF +25 LF +0 LF +0 LF +open$/m);
    expect(text).toMatch(/^ {2}fork:f1 +fork +10 LF +0 LF +0 LF +0 LF +closed \d{4}-/m);

    const json = await ml('lifeforce', 'show', 'ada', '--json');
    expect(json.code, json.stderr).toBe(0);
    const report = JSON.parse(json.stdout) as {
      budget: Record<string, unknown>;
      available: number;
      burnPerHour: number;
      hoursToExhaustion: number | null;
      recent: Array<{ kind: string; idempotencyKey: string }>;
      children: Array<{ id: string; closedAt: string | null }>;
    };
    expect(report.budget).toMatchObject({ id: 'agent:ada', capacity: 100, reserved: 23, spent: 4, funded: 125.5 });
    expect(report).toMatchObject({ available: 98.5, burnPerHour: 4, hoursToExhaustion: null });
    expect(report.recent.length).toBeGreaterThan(0);
    expect(report.recent.length).toBeLessThanOrEqual(10);
    expect(report.recent.find((e) => e.idempotencyKey === 'close:op-1')?.kind).toBe('settle');
    expect(report.children.map((c) => [c.id, c.closedAt !== null])).toEqual([
      ['task:ada/1', false],
      ['fork:f1', true],
    ]);
  }, 30_000);

  it('bad values: exit 2 naming the flag, nothing written', async () => {
    const before = { row: await budget('agent:ada'), entries: (await ledger('agent:ada')).length };
    const cases: Array<[string[], string]> = [
      [['set', 'ada'], 'lifeforce set needs at least one of --capacity'],
      [
        ['set', 'ada', '--capacity', 'lots'],
        '--capacity must be a number >= 0 and <= 1000000000 or unlimited, got "lots"',
      ],
      [['set', 'ada', '--regen', 'unlimited'], '--regen must be a number >= 0 and <= 1000000000, got "unlimited"'],
      [['set', 'ada', '--daily', 'NaN'], '--daily must be a number >= 0 and <= 1000000000 or none, got "NaN"'],
      [['set', 'ada', '--monthly', '1e12'], '--monthly must be a number >= 0 and <= 1000000000 or none, got "1e12"'],
      [['set', 'ada', '--on-exhausted', 'panic'], '--on-exhausted must be one of pause, escalate, got "panic"'],
      [['set', 'ada', '--ask-for', '-3'], '--ask-for must be a number > 0 and <= 1000000000, got "-3"'],
      [['set', 'ada', '--priority', '0'], '--priority must be 1, 2, 3, 4, 5 or auto, got "0"'],
      [['set', 'ada', '--capacity', '50', '--priority', '2.5'], '--priority must be 1, 2, 3, 4, 5 or auto, got "2.5"'],
      [['grant', 'ada', '0'], '<amount> must be a number > 0 and <= 1000000000, got "0"'],
      [['grant', 'ada', 'Infinity'], '<amount> must be a number > 0 and <= 1000000000, got "Infinity"'],
      [['grant', 'bad/id', '5'], 'bad agent id "bad/id"'],
    ];
    // Two at a time: each is a process start (the tsx loader), nothing here waits on I/O.
    for (let i = 0; i < cases.length; i += 2) {
      const batch = cases.slice(i, i + 2);
      const ran = await Promise.all(batch.map(([args]) => ml('lifeforce', ...args)));
      ran.forEach((r, j) => {
        const [args, message] = batch[j]!;
        expect(r.code, `${args.join(' ')}: ${r.stderr}`).toBe(2);
        expect(r.stderr, args.join(' ')).toContain(message);
      });
    }
    const missing = await ml('lifeforce', 'grant', 'ada', '5', '--budget', 'task:ada/99');
    expect(missing.code).toBe(1);
    expect(missing.stderr).toContain('no lifeforce budget task:ada/99');
    const closed = await ml('lifeforce', 'grant', 'ada', '5', '--budget', 'fork:f1');
    expect(closed.code).toBe(1);
    expect(closed.stderr).toContain('budget fork:f1 is closed');
    const unknown = await ml('lifeforce', 'set', 'nobody', '--capacity', '10');
    expect(unknown.code).toBe(1);
    expect(unknown.stderr).toContain("no agent 'nobody'");
    expect(await budget('agent:nobody')).toBeUndefined();
    const { updatedAt: _u1, regenAt: _r1, ...rowBefore } = before.row!;
    const { updatedAt: _u2, regenAt: _r2, ...rowAfter } = (await budget('agent:ada'))!;
    expect(rowAfter).toEqual(rowBefore);
    expect((await ledger('agent:ada')).length).toBe(before.entries);
  }, 180_000);
});

/**
 * `lifeforce set` and `grant` against what one think of the agent reserves: the router's worst
 * case for its first agent model, its output cap and a prompt as long as its last one. The
 * expected numbers are computed here by the same functions from the same rows.
 */
describe('mindloop lifeforce: what one think reserves', () => {
  const model = {
    agentId: 'cy',
    name: 'main',
    provider: 'scripted' as const,
    model: 'cy-model',
    role: 'agent' as const,
    priority: 5,
    costPer1kInput: 0.0005,
    costPer1kOutput: 0.0015,
  };
  // Its last prompt as stored, the user message cut to the row's cap (`chars` is its whole length).
  const prompt = [
    { role: 'system' as const, content: 'You are Cy. '.repeat(300) },
    { role: 'user' as const, content: 'tick 7, a note: ünïcödé '.repeat(40), chars: 4000 },
  ];
  let need: number;
  const lf = (n: number) => `${lfRound(n)} LF`;

  beforeAll(async () => {
    await h.db.insert(agents).values({ id: 'cy', name: 'Cy' });
    // A validator row asked first by priority: a think asks the first *agent* row.
    await h.db.insert(llmRegistry).values([
      {
        ...model,
        name: 'judge',
        model: 'judge-model',
        role: 'validator',
        priority: 1,
        costPer1kInput: 1,
        costPer1kOutput: 1,
      },
      model,
    ]);
    await h.db.insert(agentConfig).values({ agentId: 'cy', key: 'max_tokens', value: 300 });
    await h.db.insert(tickPrompts).values([
      { agentId: 'cy', tick: 6, messages: [{ role: 'user', content: 'short' }], chars: 5, promptTokens: 2 },
      { agentId: 'cy', tick: 7, messages: prompt, chars: prompt[0]!.content.length + 4000, promptTokens: 1000 },
    ]);
    const known = await thinkBasis(h.db, 'cy');
    expect(known).toMatchObject({ model: 'scripted:cy-model', promptTick: 7, basis: { maxTokens: 300 } });
    need = thinkReservation(defaultPrices, known.basis)!;
    // What the router holds for this call: its worst case for the row, the prompt and the cap.
    expect(need).toBe(llmWorstCase(defaultPrices, model, prompt, 300));
  });

  it('set: a capacity under it is stored with a warning naming the reservation, the smallest grant and capacity; one above it says nothing', async () => {
    const cap = Math.floor(need) - 1;
    const low = await ml('lifeforce', 'set', 'cy', '--capacity', String(cap));
    expect(low.code, low.stderr).toBe(0);
    expect(low.stdout).toContain(`set agent:cy: capacity ${cap} LF`);
    expect(await budget('agent:cy')).toMatchObject({ capacity: cap, balance: cap });
    expect(low.stderr).toContain(
      `warning: one think of cy reserves about ${lf(need)} (scripted:cy-model, 300 output tokens, a prompt as long as tick 7's); cy cannot think: needs ${lf(need - cap)} (the smallest grant: mindloop lifeforce grant cy ${lfRound(need - cap)}); a capacity under ${lf(need)} never holds it, nor does regeneration fill it (mindloop lifeforce set cy --capacity ${lfRound(need)})`,
    );

    const high = await ml('lifeforce', 'set', 'cy', '--capacity', String(Math.ceil(need)));
    expect(high.code, high.stderr).toBe(0);
    expect(high.stderr).not.toContain('warning');
  }, 30_000);

  it('set: a daily or monthly limit under it warns the same way', async () => {
    const daily = await ml('lifeforce', 'set', 'cy', '--daily', String(Math.floor(need / 2)));
    expect(daily.code, daily.stderr).toBe(0);
    expect(daily.stderr).toContain(
      `cy cannot think: needs a daily limit of ${lf(need)} (mindloop lifeforce set cy --daily ${lfRound(need)})`,
    );
    const monthly = await ml('lifeforce', 'set', 'cy', '--daily', 'none', '--monthly', '1');
    expect(monthly.stderr).toContain(
      `cy cannot think: needs a monthly limit of ${lf(need)} (mindloop lifeforce set cy --monthly ${lfRound(need)})`,
    );
    const none = await ml('lifeforce', 'set', 'cy', '--monthly', 'none');
    expect(none.code, none.stderr).toBe(0);
    expect(none.stderr).not.toContain('warning');
  }, 30_000);

  it('grant: one that leaves it short says how much more; the grant it names is exactly what lets the think be held', async () => {
    const cap = Math.floor(need) - 1;
    await ml('lifeforce', 'set', 'cy', '--capacity', String(cap));
    const short = lfRound(need - cap);
    const half = lfRound(short / 2);
    const first = await ml('lifeforce', 'grant', 'cy', String(half));
    expect(first.code, first.stderr).toBe(0);
    expect(first.stderr).toContain(
      `cy cannot think: needs ${lf(short - half)} (the smallest grant: mindloop lifeforce grant cy ${lfRound(short - half)})`,
    );
    const think = { budgetId: 'agent:cy', amount: need, operation: 'llm_call', ttlMs: 60_000, reason: 'think' };
    expect(await reserve(h.db, { ...think, key: 'cy-think-1' })).toMatchObject({ ok: false, reason: 'balance' });

    const rest = await ml('lifeforce', 'grant', 'cy', String(lfRound(short - half)));
    expect(rest.code, rest.stderr).toBe(0);
    expect(rest.stderr).not.toContain('cannot think');
    // It can think once; its capacity still never holds a think.
    expect(rest.stderr).toContain(`it can think now, but a capacity under ${lf(need)} never holds it`);
    expect(await reserve(h.db, { ...think, key: 'cy-think-2' })).toMatchObject({ ok: true });
    await release(h.db, 'cy-think-2', 'test');
  }, 30_000);
});
