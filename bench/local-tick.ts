/**
 * local-tick: the demo agent's tick on the offline local model (SmolLM2-135M on the CPU, as
 * `npm start` runs it): a fresh agent with the default registry and the reflexes on runs
 * `ticks` ticks back to back on the embedded stack. Tick time is the wall time between
 * consecutive recorded replies (the first tick, which pays for the model's load and the first
 * full prompt, is reported apart). Prompt evaluation and generation are measured per call by
 * the local provider (`llm_calls.metadata.local`).
 */
import { and, asc, eq } from 'drizzle-orm';
import { createActivities } from '../activities/index.js';
import {
  defaultLocalModelName,
  defaultLocalThreads,
  disposeLocalModels,
  preloadLocalModel,
} from '../activities/llm/index.js';
import { agents, llmCalls, llmRecentResponses } from '../db/schema/index.js';
import type { Stack } from '../runtime/stack.js';
import type { agentLoopWorkflow } from '../workflows/agent-loop/index.js';
import { percentile, summarize, withBenchWorker } from './lib.js';
import { workflowFailover } from '../workflows/lib/activity-options.js';

interface LocalStats {
  evaluatedPromptTokens: number;
  promptEvalMs: number;
  genTokens: number;
  genMs: number;
}

const isStats = (v: unknown): v is LocalStats =>
  typeof v === 'object' && v !== null && typeof (v as LocalStats).evaluatedPromptTokens === 'number';

export async function measureLocalTick(
  stack: Stack,
  toolsDir: string,
  opts: { ticks?: number } = {},
): Promise<{ metrics: Record<string, number | string>; notes: Record<string, string> }> {
  const ticks = opts.ticks ?? 12;
  const db = stack.db.db;
  const agentId = 'local-tick';
  const { modelPath, loadMs } = await preloadLocalModel({ toolsDir });
  await db.insert(agents).values({ id: agentId, name: 'Local tick' }).onConflictDoNothing();
  const activities = createActivities({ db, llm: { env: {}, toolsDir } });
  try {
    await withBenchWorker(stack, { taskQueue: 'bench-local-tick', activities }, async (client) => {
      const h = await client.workflow.start<typeof agentLoopWorkflow>('agentLoopWorkflow', {
        ...workflowFailover,
        taskQueue: 'bench-local-tick',
        workflowId: `agent/${agentId}`,
        // As the demo agent (default settings, reflexes on), without the pause between ticks.
        args: [{ agentId, name: 'Local tick', maxTicks: ticks, settings: { delayMs: 0 } }],
      });
      await h.result();
    });
  } finally {
    await disposeLocalModels();
  }
  const replies = await db
    .select({ tick: llmRecentResponses.tick, at: llmRecentResponses.createdAt })
    .from(llmRecentResponses)
    .where(eq(llmRecentResponses.agentId, agentId))
    .orderBy(asc(llmRecentResponses.tick));
  const gaps = replies.slice(1).map((r, i) => r.at.getTime() - replies[i]!.at.getTime());
  const calls = await db
    .select()
    .from(llmCalls)
    .where(and(eq(llmCalls.agentId, agentId), eq(llmCalls.ok, true)));
  const thinks = calls.filter((c) => c.purpose === 'think');
  const stats = calls
    .map((c) => ({ purpose: c.purpose ?? '', local: c.metadata?.local }))
    .filter((c): c is { purpose: string; local: LocalStats } => isStats(c.local));
  const sum = (xs: number[]) => xs.reduce((a, b) => a + b, 0);
  // Rates over the calls that evaluated or generated enough to measure.
  const evalCalls = stats.filter((s) => s.local.evaluatedPromptTokens >= 32);
  const genCalls = stats.filter((s) => s.local.genTokens >= 8);
  const thinkStats = stats.filter((s) => s.purpose === 'think');
  const tick = summarize(gaps);
  const p50 = (xs: number[]) =>
    percentile(
      [...xs].sort((a, b) => a - b),
      50,
    );
  const metrics = {
    tick_p50_ms: tick.p50,
    tick_p99_ms: tick.p99,
    ticks_measured: gaps.length,
    first_tick_ms: thinks.sort((a, b) => (a.tick ?? 0) - (b.tick ?? 0))[0]?.latencyMs ?? Number.NaN,
    think_p50_ms: p50(thinks.map((c) => c.latencyMs ?? 0)),
    prompt_tokens_p50: p50(thinks.map((c) => c.promptTokens)),
    evaluated_prompt_tokens_p50: p50(thinkStats.map((s) => s.local.evaluatedPromptTokens)),
    think_prompt_eval_ms_p50: p50(thinkStats.map((s) => s.local.promptEvalMs)),
    think_gen_ms_p50: p50(thinkStats.map((s) => s.local.genMs)),
    completion_tokens_p50: p50(thinks.map((c) => c.completionTokens)),
    mini_prompt_p50_ms: p50(calls.filter((c) => c.purpose !== 'think').map((c) => c.latencyMs ?? 0)),
    mini_prompt_completion_tokens_p50: p50(calls.filter((c) => c.purpose !== 'think').map((c) => c.completionTokens)),
    prompt_eval_tokens_per_s:
      (sum(evalCalls.map((s) => s.local.evaluatedPromptTokens)) / sum(evalCalls.map((s) => s.local.promptEvalMs))) *
      1000,
    gen_tokens_per_s: (sum(genCalls.map((s) => s.local.genTokens)) / sum(genCalls.map((s) => s.local.genMs))) * 1000,
    llm_calls_per_tick: calls.length / Math.max(1, replies.length),
    model: defaultLocalModelName,
  };
  return {
    metrics,
    notes: {
      run: `one demo agent (default settings, reflexes on), ${ticks} ticks back to back (delay 0) on the embedded stack; tick time = gap between consecutive recorded replies (${gaps.length} gaps; the first tick, with the first full prompt evaluation, is first_tick_ms); ${defaultLocalThreads()} llama.cpp thread(s); model loaded in ${loadMs} ms from ${modelPath}`,
      rates:
        'prompt_eval_tokens_per_s: tokens evaluated (the prompt tail not in the KV cache) / time to the first generated token, over calls evaluating >= 32 tokens; gen_tokens_per_s: generated tokens / time after the first, over calls generating >= 8',
      target: `tick_p50_ms <= 10000: ${tick.p50 <= 10_000 ? 'met' : 'missed'}`,
    },
  };
}
