/**
 * `mindloop nerves show|undo` run as processes against the real Postgres: a nerve's learning
 * (recorded through db/queries/nerves.ts as its activities record it) is shown with its earned
 * mode, rules, decisions and event ids; an undo reverses a demotion and a promotion, and is
 * refused twice, for another agent's event, or for an event that does not exist; bad arguments
 * exit 2 naming them and change nothing.
 */
import { asc, eq } from 'drizzle-orm';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { recordDecision, type NewNerveDecision } from '../../db/queries/nerves.js';
import { agents, nerveRuleEvents, nerveRules } from '../../db/schema/index.js';
import { migratedDatabase, type MigratedDatabase } from '../helpers/env.js';
import { repoRoot, run } from '../helpers/spawn.js';

const cli = `${repoRoot}/bin/mindloop.mjs`;
let h: MigratedDatabase;
const cfg = { promoteAfter: 3, agreement: 0.9 };
let seq = 0;

const decision = (d: Partial<NewNerveDecision>): NewNerveDecision => ({
  agentId: 'nia',
  nerve: 'collision',
  state: 'IDLE',
  bucket: 'near_fast',
  action: 'detect',
  toState: 'DETECT',
  decidedBy: 'llm',
  mode: 'deliberate',
  outcome: 'ok',
  lf: 0.1,
  latencyMs: 3,
  reply: null,
  ledgerKey: null,
  key: `cli-test/${seq++}`,
  at: Date.UTC(2026, 10, 24, 12, 0, seq),
  ...d,
});

beforeAll(async () => {
  h = await migratedDatabase('mindloop_nerves_cli', 2);
  await h.db.insert(agents).values([
    { id: 'nia', name: 'Nia' },
    { id: 'ole', name: 'Ole' },
  ]);
  // Three consistent choices promote IDLE/near_fast → detect; a rule decision that went wrong demotes it.
  for (let i = 0; i < 3; i++) await recordDecision(h.db, decision({}), cfg);
  await recordDecision(h.db, decision({ decidedBy: 'rule', mode: 'hybrid', outcome: 'bad' }), cfg);
  // A second case promoted and kept.
  for (let i = 0; i < 3; i++)
    await recordDecision(
      h.db,
      decision({ state: 'DETECT', bucket: 'near_fast', action: 'evaluate', toState: 'EVALUATE' }),
      cfg,
    );
}, 60_000);
afterAll(async () => {
  await h?.dispose();
});

const ml = (...args: string[]) => run(process.execPath, [cli, ...args], { DATABASE_URL: h.url });
const events = () => h.db.select().from(nerveRuleEvents).orderBy(asc(nerveRuleEvents.id));
const rule = async (state: string) => (await h.db.select().from(nerveRules).where(eq(nerveRules.state, state)))[0];

describe('mindloop nerves', () => {
  it('show: the earned mode, the rules, the decisions by mode and decider, the events with their ids; --json the same', async () => {
    const [promoted, demoted, kept] = await events();
    expect([promoted?.kind, demoted?.kind, kept?.kind]).toEqual(['promote', 'demote', 'promote']);
    const r = await ml('nerves', 'nia');
    expect(r.code, r.stderr).toBe(0);
    expect(r.stdout).toContain('nerve collision of agent nia: earned mode hybrid, 1 rule over 2 cases seen');
    expect(r.stdout).toMatch(/deliberate\s+llm\s+6\s+0\s+0\.6/);
    expect(r.stdout).toMatch(/hybrid\s+rule\s+1\s+1\s+0\.1/);
    expect(r.stdout).toMatch(/DETECT\s+near_fast\s+evaluate\s+3\s+100%/);
    expect(r.stdout).toContain(`#${demoted!.id}`);
    expect(r.stdout).toContain('demoted IDLE/near_fast → detect: a decision it made went wrong');
    expect(r.stdout).toContain(`promoted IDLE/near_fast → detect (3 choices, 100% agreed)`);

    const json = await ml('nerves', 'show', 'nia', '--json');
    expect(json.code, json.stderr).toBe(0);
    const shown = JSON.parse(json.stdout) as { nerve: string; mode: string; events: { id: number }[] }[];
    expect(shown.map((n) => [n.nerve, n.mode])).toEqual([['collision', 'hybrid']]);
    expect(shown[0]!.events.map((e) => e.id)).toEqual([kept!.id, demoted!.id, promoted!.id]);

    const none = await ml('nerves', 'ole');
    expect(none.code, none.stderr).toBe(0);
    expect(none.stdout).toContain('agent ole has no nerve that decided anything yet');
  }, 60_000);

  it('undo: a demotion brings the rule back, a promotion takes it away; twice, or for another agent, is refused', async () => {
    const [, demoted, kept] = await events();
    const wrongAgent = await ml('nerves', 'undo', 'ole', String(demoted!.id));
    expect(wrongAgent.code).toBe(1);
    expect(wrongAgent.stderr).toContain(`nerve event #${demoted!.id} belongs to agent nia, not ole`);

    const back = await ml('nerves', 'undo', 'nia', `#${demoted!.id}`);
    expect(back.code, back.stderr).toBe(0);
    expect(back.stdout).toContain('undid the demotion of IDLE/near_fast → detect');
    expect(await rule('IDLE')).toMatchObject({ action: 'detect', support: 3 });

    const twice = await ml('nerves', 'undo', 'nia', String(demoted!.id));
    expect(twice.code).toBe(1);
    expect(twice.stderr).toContain(`event #${demoted!.id} was undone already`);

    const away = await ml('nerves', 'undo', 'nia', String(kept!.id));
    expect(away.code, away.stderr).toBe(0);
    expect(away.stdout).toContain('undid the promotion of DETECT/near_fast → evaluate');
    expect(await rule('DETECT')).toMatchObject({ action: null });

    const shown = await ml('nerves', 'nia');
    expect(shown.stdout).toMatch(/undo of #\d+ \(DETECT\/near_fast → evaluate\)/);
    expect(shown.stdout).toContain('(undone)');

    const missing = await ml('nerves', 'undo', 'nia', '999999');
    expect(missing.code).toBe(1);
    expect(missing.stderr).toContain('no nerve event #999999');
  }, 60_000);

  it('bad arguments: exit 2 naming them; an unknown agent is a clear error; nothing changes', async () => {
    const before = (await events()).length;
    const badEvent = await ml('nerves', 'undo', 'nia', 'abc');
    expect(badEvent.code).toBe(2);
    expect(badEvent.stderr).toContain('<event> must be an integer');
    const badNerve = await ml('nerves', 'nia', '--nerve', 'sneeze');
    expect(badNerve.code).toBe(2);
    expect(badNerve.stderr).toContain('--nerve must be one of collision');
    const badAgent = await ml('nerves', 'no body');
    expect(badAgent.code).toBe(2);
    expect(badAgent.stderr).toContain('bad agent id "no body"');
    const unknown = await ml('nerves', 'undo', 'nobody', '1');
    expect(unknown.code).toBe(1);
    expect(unknown.stderr).toContain("no agent 'nobody'");
    expect((await events()).length).toBe(before);
  }, 60_000);
});
