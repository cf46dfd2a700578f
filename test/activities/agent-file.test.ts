/**
 * Agent files on the real Postgres: a file creates the agent, the same file again changes
 * nothing, a changed file changes what it says and is recorded, the agent's own changes are kept
 * as drift, a change on both sides is refused unless drift is overwritten, export → apply is a
 * no-op, and a file naming a model or peer that does not exist writes nothing.
 */
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { ApplicationFailure } from '@temporalio/common';
import { and, eq } from 'drizzle-orm';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { applyAgentFileTo, readLiveDocument } from '../../activities/agent-file.js';
import { parseAgentFile, renderAgentFile, type AgentDocument } from '../../core/agent-file/index.js';
import { agentConfig, agentFiles, agents, goals, llmRegistry, models, systemPrompts } from '../../db/schema/index.js';
import { migratedDatabase, type MigratedDatabase } from '../helpers/env.js';

let h: MigratedDatabase;

beforeAll(async () => {
  h = await migratedDatabase('mindloop_agent_file', 2);
  await h.db.insert(models).values({ name: 'tiny', provider: 'scripted', model: 'scripted', role: 'agent' });
});
afterAll(async () => {
  await h?.dispose();
});

const doc = (yaml: string): AgentDocument => {
  const r = parseAgentFile(yaml);
  if (!r.ok) throw new Error(r.errors.join('\n'));
  return r.document;
};

const file = (id: string, extra = '') => `id: ${id}
name: Ada
systemPrompt:
  short: You help.
goals:
  - title: Learn Go
    priority: 2
  - title: Ship v1
models:
  agent: local
  validators:
    - model: tiny
      trust: 0.8
lifeforce:
  capacity: 5000
  onExhausted: pause
pace:
  delayMs: 2000
idle:
  on: true
config:
  novelty_threshold: 0.3
${extra}`;

const apply = (document: unknown, o: { dryRun?: boolean; overwriteDrift?: boolean } = {}) =>
  applyAgentFileTo(h.db, { agentId: (document as { id: string }).id, document, appliedBy: 'test', ...o });

async function refused(p: Promise<unknown>): Promise<ApplicationFailure> {
  const err = await p.then(
    () => undefined,
    (e: unknown) => e,
  );
  expect(err).toBeInstanceOf(ApplicationFailure);
  return err as ApplicationFailure;
}

describe('applyAgentFile', () => {
  it('creates the agent with everything the file says, and records the apply', async () => {
    const r = await apply(doc(file('ada')));
    expect(r).toMatchObject({ created: true, changed: true, applied: true });
    expect(r.diff.map((l) => l.key)).toContain('goals["Learn Go"]');
    expect(r.loopSettings).toEqual({ delayMs: 2000, idle: { on: true } });
    const [agent] = await h.db.select().from(agents).where(eq(agents.id, 'ada'));
    expect(agent?.name).toBe('Ada');
    const rows = await h.db.select().from(llmRegistry).where(eq(llmRegistry.agentId, 'ada'));
    expect(rows.map((r) => [r.role, r.modelName, r.trust]).sort()).toEqual([
      ['agent', 'local', 1],
      ['validator', 'tiny', expect.closeTo(0.8, 5)],
    ]);
    const [delay] = await h.db
      .select()
      .from(agentConfig)
      .where(and(eq(agentConfig.agentId, 'ada'), eq(agentConfig.key, 'delay_ms')));
    expect(delay?.value).toBe(2000);
    const recorded = await h.db.select().from(agentFiles).where(eq(agentFiles.agentId, 'ada'));
    expect(recorded).toHaveLength(1);
    expect(recorded[0]).toMatchObject({ appliedBy: 'test', id: r.fileId });
  });

  it('the same file again changes nothing, says so, and records nothing', async () => {
    const r = await apply(doc(file('ada')));
    expect(r).toMatchObject({ created: false, changed: false, applied: false, diff: [], fileId: null });
    expect(r.text).toContain('nothing to change');
    expect(await h.db.$count(agentFiles, eq(agentFiles.agentId, 'ada'))).toBe(1);
  });

  it('a changed file prints and applies its changes only; --dry-run prints them and writes nothing', async () => {
    const changed = doc(
      file('ada').replace('short: You help.', 'short: You help kindly.').replace('priority: 2', 'priority: 5'),
    );
    const dry = await apply(changed, { dryRun: true });
    expect(dry).toMatchObject({ changed: true, applied: false, fileId: null });
    expect(dry.diff.map((l) => l.text)).toEqual([
      '~ systemPrompt.short: "You help." → "You help kindly."',
      '~ goals["Learn Go"]: priority: 2 → 5',
    ]);
    const [prompt] = await h.db
      .select()
      .from(systemPrompts)
      .where(and(eq(systemPrompts.agentId, 'ada'), eq(systemPrompts.active, true)));
    expect(prompt?.content).toBe('You help.');
    const r = await apply(changed);
    expect(r).toMatchObject({ changed: true, applied: true });
    const prompts = await h.db.select().from(systemPrompts).where(eq(systemPrompts.agentId, 'ada'));
    expect(prompts.map((p) => [p.version, p.active, p.content]).sort()).toEqual([
      [1, false, 'You help.'],
      [2, true, 'You help kindly.'],
    ]);
    expect(await h.db.$count(agentFiles, eq(agentFiles.agentId, 'ada'))).toBe(2);
  });

  it('keeps what the agent changed itself (drift) and refuses a change on both sides unless drift is overwritten', async () => {
    const current = doc(
      file('ada').replace('short: You help.', 'short: You help kindly.').replace('priority: 2', 'priority: 5'),
    );
    // The agent closes a goal and sets a config key of its own.
    await h.db
      .update(goals)
      .set({ status: 'completed' })
      .where(and(eq(goals.agentId, 'ada'), eq(goals.title, 'Ship v1')));
    await h.db.insert(agentConfig).values({ agentId: 'ada', key: 'recent_responses', value: 9 });
    const again = await apply(current);
    expect(again).toMatchObject({ changed: false, applied: false });
    expect(again.drift.map((l) => l.text).sort()).toEqual([
      '+ config["recent_responses"]: 9',
      '~ goals["Ship v1"]: status: "active" → "completed"',
    ]);
    const [kept] = await h.db
      .select()
      .from(goals)
      .where(and(eq(goals.agentId, 'ada'), eq(goals.title, 'Ship v1')));
    expect(kept?.status).toBe('completed');

    // The file now changes that goal too: a conflict, refused, nothing written.
    const both = doc(
      file('ada')
        .replace('short: You help.', 'short: Changed again.')
        .replace('priority: 2', 'priority: 5')
        .replace('  - title: Ship v1', '  - title: Ship v1\n    priority: 3'),
    );
    const err = await refused(apply(both));
    expect(err.message).toContain('goals["Ship v1"]');
    expect(err.message).toContain('--overwrite-drift');
    const [prompt] = await h.db
      .select()
      .from(systemPrompts)
      .where(and(eq(systemPrompts.agentId, 'ada'), eq(systemPrompts.active, true)));
    expect(prompt?.content).toBe('You help kindly.');

    const over = await apply(both, { overwriteDrift: true });
    expect(over.applied).toBe(true);
    const [taken] = await h.db
      .select()
      .from(goals)
      .where(and(eq(goals.agentId, 'ada'), eq(goals.title, 'Ship v1')));
    expect([taken?.status, taken?.priority]).toEqual(['active', 3]);
  });

  it('export → apply of the exported file is a no-op', async () => {
    const live = await readLiveDocument(h.db, 'ada');
    const text = renderAgentFile(live!);
    const exported = doc(text);
    const r = await apply(exported);
    expect(r).toMatchObject({ changed: false, diff: [], drift: [], conflicts: [] });
    expect(await readLiveDocument(h.db, 'ada')).toEqual(live);
    // And again, now that the exported file is the base.
    expect((await apply(doc(text))).changed).toBe(false);
  });

  it('refuses a model or a peer that does not exist, writing nothing', async () => {
    const before = await h.db.$count(agentFiles);
    const badModel = await refused(apply(doc(file('bea').replace('agent: local', 'agent: gpt-9'))));
    expect(badModel.message).toContain("no model 'gpt-9' in the catalogue");
    const badPeer = await refused(apply(doc(file('bea', 'peers: [nobody-here]'))));
    expect(badPeer.message).toContain("no agent 'nobody-here'");
    expect(await h.db.$count(agents, eq(agents.id, 'bea'))).toBe(0);
    expect(await h.db.$count(agentFiles)).toBe(before);
    // A peer of the same batch, or one reached at an endpoint, is known.
    const ok = await applyAgentFileTo(h.db, {
      agentId: 'bea',
      document: doc(file('bea', 'peers: [ada, cyd, {id: far, endpoint: "mindloop.other"}]')),
      appliedBy: 'test',
      batchAgents: ['cyd'],
    });
    expect(ok.applied).toBe(true);
  });

  it('refuses a document whose id is not the agent it is applied to, or that does not parse', async () => {
    const err = await refused(
      applyAgentFileTo(h.db, { agentId: 'ada', document: doc(file('zed')), appliedBy: 'test' }),
    );
    expect(err.message).toContain("its id is 'zed'");
    const bad = await refused(
      applyAgentFileTo(h.db, { agentId: 'ada', document: { id: 'ada', goals: [{ titel: 'x' }] }, appliedBy: 'test' }),
    );
    expect(bad.message).toContain("goals[0].titel: unknown key (did you mean 'title'?)");
  });

  it('a retried apply with the same request key returns its first attempt, writing nothing more', async () => {
    const input = {
      agentId: 'eve',
      document: doc('id: eve\nname: Eve\ngoals: [{title: one}]\n'),
      appliedBy: 'test',
      requestKey: 'agent/eve:update-1',
    };
    const first = await applyAgentFileTo(h.db, input);
    const retry = await applyAgentFileTo(h.db, input);
    expect(retry).toMatchObject({ changed: true, applied: true, fileId: first.fileId, diff: first.diff });
    expect(await h.db.$count(agentFiles, eq(agentFiles.agentId, 'eve'))).toBe(1);
    // Without the key the same file is a no-op.
    expect((await applyAgentFileTo(h.db, { ...input, requestKey: undefined })).changed).toBe(false);
  });

  it('refuses an agent last applied by another deployment', async () => {
    await applyAgentFileTo(h.db, {
      agentId: 'dee',
      document: doc('id: dee\nname: Dee\n'),
      appliedBy: 'test',
      deployment: 'dep-a',
    });
    const err = await refused(
      applyAgentFileTo(h.db, {
        agentId: 'dee',
        document: doc('id: dee\nname: Dee 2\n'),
        appliedBy: 'test',
        deployment: 'dep-b',
      }),
    );
    expect(err.message).toContain('belongs to deployment dep-a');
  });

  it('the examples apply as they are (the researcher once its two catalogue models are added), and again as no-ops', async () => {
    await h.db.insert(models).values([
      {
        name: 'research-main',
        provider: 'openai',
        model: 'qwen2.5:7b',
        baseUrl: 'http://127.0.0.1:11434/v1',
        role: 'agent',
      },
      {
        name: 'research-check',
        provider: 'openai',
        model: 'llama3.2:3b',
        baseUrl: 'http://127.0.0.1:11434/v1',
        role: 'validator',
      },
    ]);
    const examples = ['companion.yaml', 'researcher.yaml', 'peers/ada.yaml', 'peers/bo.yaml'].map((n) =>
      doc(readFileSync(join(import.meta.dirname, '..', '..', 'examples', n), 'utf8')),
    );
    for (const d of examples) {
      const r = await applyAgentFileTo(h.db, {
        agentId: d.id,
        document: d,
        appliedBy: 'test',
        batchAgents: ['ada', 'bo'],
      });
      expect(r, d.id).toMatchObject({ applied: true, conflicts: [] });
    }
    for (const d of examples) expect((await apply(d)).changed, d.id).toBe(false);
  });
});
