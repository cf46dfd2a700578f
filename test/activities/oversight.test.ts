/**
 * The oversight graph without Temporal: the router sends each category to its sub-agent, a
 * malformed answer is asked again (then a typed non-retryable failure), and an agent without
 * an `oversight` model gets the local one (the offline default).
 */
import { ApplicationFailure } from '@temporalio/common';
import { and, eq } from 'drizzle-orm';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { ChatRequest, ChatResult, LlmRouter } from '../../activities/llm/index.js';
import { buildOversightGraph, ensureOversightModel } from '../../activities/oversight.js';
import { escalationInput, subAgentBriefs } from '../../core/escalation.js';
import { createDb, type DbHandle } from '../../db/client.js';
import { runMigrations } from '../../db/migrate.js';
import { agents, llmRegistry } from '../../db/schema/index.js';
import { freshPostgresDatabase } from '../helpers/env.js';

function fakeRouter(replies: (req: ChatRequest) => string): LlmRouter & { calls: ChatRequest[] } {
  const calls: ChatRequest[] = [];
  return {
    calls,
    async chat(req): Promise<ChatResult> {
      calls.push(req);
      return { text: replies(req), registryId: 1, provider: 'scripted', model: 'fake', usage: { promptTokens: 1, completionTokens: 1 }, costUsd: 0, latencyMs: 1, attempts: [], replayed: false, callId: calls.length };
    },
    async candidates() {
      return [];
    },
    async registry() {
      return [];
    },
    async previousCalls() {
      return [];
    },
  };
}
const good = JSON.stringify({ verdict: 'nudge', solution: 's', teaching_moment: 't', recommended_tools: ['database'] });
const input = (category: string) => ({ escalation: escalationInput.parse({ escalationId: 'e1', agentId: 'ada', task: 'help', category }), round: 1, key: 'k', catalogue: [] });

describe('oversight graph', () => {
  it('routes each category to its sub-agent', async () => {
    for (const category of Object.keys(subAgentBriefs)) {
      const llm = fakeRouter(() => good);
      const out = await buildOversightGraph({ db: undefined as never, llm }).invoke({ input: input(category) });
      expect(out.route).toBe(category);
      expect(llm.calls[0]).toMatchObject({ role: 'oversight', purpose: `oversight:${category}`, idempotencyKey: `k/r1/${category}/a1` });
      expect(llm.calls[0]!.messages[0]!.content).toBe(subAgentBriefs[category as keyof typeof subAgentBriefs]);
      expect(out.answer).toEqual({ verdict: 'nudge', solution: 's', teaching_moment: 't', recommended_tools: ['database'], needs_human: false });
    }
  });

  it('a malformed answer is asked again with the reason; twice malformed is a typed non-retryable failure', async () => {
    let n = 0;
    const llm = fakeRouter(() => (n++ === 0 ? '{"verdict":"maybe"}' : good));
    const out = await buildOversightGraph({ db: undefined as never, llm }).invoke({ input: input('code') });
    expect(out.callIds).toEqual([1, 2]);
    expect(llm.calls[1]!.messages.at(-1)!.content).toContain('Your previous answer was invalid (verdict: Invalid option');
    const bad = fakeRouter(() => 'no JSON here');
    const err = await buildOversightGraph({ db: undefined as never, llm: bad }).invoke({ input: input('code') }).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(ApplicationFailure);
    expect(err).toMatchObject({ type: 'MalformedOversightReply', nonRetryable: true });
    expect((err as Error).message).toContain('no well-formed answer after 2 attempts: the answer is not JSON');
  });
});

describe('offline default oversight model', () => {
  let handle: DbHandle;
  let drop: () => Promise<void>;
  beforeAll(async () => {
    const fresh = await freshPostgresDatabase('mindloop_oversight');
    drop = fresh.drop;
    handle = createDb(fresh.url);
    await runMigrations(handle.pool);
  });
  afterAll(async () => {
    await handle?.close();
    await drop?.();
  });
  it('an agent without an oversight row gets the local model, once', async () => {
    await handle.db.insert(agents).values({ id: 'solo', name: 'solo' });
    expect(await ensureOversightModel(handle.db, 'solo')).toEqual({ created: true });
    expect(await ensureOversightModel(handle.db, 'solo')).toEqual({ created: false });
    const rows = await handle.db.select().from(llmRegistry).where(and(eq(llmRegistry.agentId, 'solo'), eq(llmRegistry.role, 'oversight')));
    expect(rows).toHaveLength(1);
    expect(rows[0]).toMatchObject({ provider: 'local', name: 'default-oversight' });
  });
});
