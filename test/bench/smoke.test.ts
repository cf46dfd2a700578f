/**
 * Every benchmark at its smoke size, through the entry people run (`npm run bench -- <name>
 * --smoke`, i.e. scripts/bootstrap.mjs), one after another: each must exit 0 and write its
 * results file, apart from the real ones, with the keys its results are read by, each a finite
 * number. A benchmark that no longer runs fails here, not the next time someone measures.
 */
import { spawn } from 'node:child_process';
import { existsSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { dockerSkipped } from '../helpers/docker.js';
import { tempDir } from '../helpers/env.js';

const root = join(import.meta.dirname, '..', '..');
const out = tempDir('bench-smoke');
afterAll(() => out.remove());

const peers = ['dbos', 'langgraph_sync', 'langgraph_async', 'temporal'];

/** The keys each benchmark's results are read by (the README, docs/sizing.md, comparisons between runs). */
const expected: Record<string, string[]> = {
  'temporal-baseline': ['activity_rt_p50_ms', 'activity_rt_p99_ms', 'workflow_rt_p50_ms', 'workflow_rt_p99_ms'],
  tick: [
    'overhead_p50_ms',
    'overhead_p99_ms',
    'overhead_p50_ratio_to_activity_rt',
    'ticks_per_s_50_agents',
    'rss_mb_500_idle_agents',
    'rss_mb_2000_idle_agents',
    'reflex_overhead_ratio',
    'ledger_overhead_p50_ms',
    'agents_at_1hz',
    'agents_at_1hz_ratio_to_floor',
    'overhead_p50_ms_pg',
    'cpu_ratio_to_floor_pg',
    'hz_ratio_bound_cpu_pg',
    'hz_ratio_bound_database_alone_pg',
  ],
  sandbox: ['start_p50_ms', 'start_p99_ms', 'plain_docker_p50_ms', 'start_ratio_vs_plain_docker'],
  fork: ['spawn_p50_ms', 'spawn_p99_ms', 'rows'],
  spawn: ['clone_p50_ms', 'clone_p99_ms', 'trained_p50_ms', 'newborn_p50_ms', 'rows'],
  learnings: ['saves_per_s', 'loads_per_s', 'decay_100k_ms'],
  nerves: [
    'deliberate_lf_per_decision',
    'reflex_lf_per_decision',
    'deliberate_p50_ms',
    'reflex_p50_ms',
    'cost_reduction_ratio',
    'latency_reduction_ratio',
  ],
  bus: [
    'echo_rt_p50_ms',
    'echo_rt_p99_ms',
    'raw_nats_rt_p50_ms',
    'echo_ratio_vs_raw',
    'publish_per_s',
    'command_to_workflow_p50_ms',
  ],
  cli: ['status_p50_ms', 'note_p50_ms', 'temporal_cli_p50_ms'],
  'local-tick': ['tick_p50_ms', 'tick_p99_ms', 'prompt_tokens_p50', 'prompt_eval_tokens_per_s', 'gen_tokens_per_s'],
  speech: ['stt_rtf_p50', 'tts_rtf_p50', 'wer_en', 'wer_de', 'queue_wait_p50_ms'],
  peers: [
    ...peers.flatMap((p) => [
      `${p}_step_p50_ms`,
      `${p}_steps_per_s_50`,
      `mindloop_tick_ratio_vs_${p}`,
      `crash_duplicated_steps_${p}`,
      `crash_lost_steps_${p}`,
      `crash_back_p50_s_${p}`,
    ]),
    'crash_duplicated_steps_mindloop',
    'crash_lost_steps_mindloop',
    'crash_back_p50_s_mindloop',
  ],
  'tick-compare': [
    'before_bare_overhead_p50_ms',
    'after_bare_overhead_p50_ms',
    'bare_overhead_p50_after_before_ratio',
    'reflex_overhead_p50_after_before_ratio',
  ],
  'mcp-tools': [
    'agent_call_p50_ms',
    'direct_call_p50_ms',
    'overhead_p50_ms',
    'activity_rt_p50_ms',
    'calls_per_s_20_agents',
  ],
  tokens: ['openai', 'anthropic'].flatMap((p) => [
    `prompt_tokens_per_tick_${p}`,
    `cached_share_${p}`,
    `lf_per_tick_${p}`,
    `lf_per_tick_before_${p}`,
    `lf_per_tick_reduction_${p}`,
  ]),
  memory: [
    'embed_texts_per_s',
    'recall_p50_ms_100k_pg',
    'recall_p99_ms_100k_pg',
    'recall_p50_ms_100k_pglite',
    'recall_p99_ms_100k_pglite',
    'novelty_auc_today',
    'novelty_auc_semantic',
    'novelty_auc_blend',
    'tick_overhead_ratio_semantic',
  ],
  soak: ['minutes', 'ticks', 'rss_drift_ratio', 'heap_drift_ratio', 'rows_per_tick', 'max_history_events', 'errors'],
};

/** Keys that name a thing rather than measure it. */
const named: Record<string, string[]> = { 'local-tick': ['model'] };

/** `npm run bench -- <name> --smoke --out=<dir>` as a process: its exit code, its output's tail and how long it took. */
function smoke(name: string): Promise<{ code: number | null; tail: string; seconds: number }> {
  const t0 = performance.now();
  return new Promise((resolve, reject) => {
    const child = spawn('npm', ['run', '--silent', 'bench', '--', name, '--smoke', `--out=${out.path}`], {
      cwd: root,
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    let tail = '';
    const keep = (d: Buffer) => (tail = (tail + d.toString()).slice(-6000));
    child.stdout.on('data', keep);
    child.stderr.on('data', keep);
    child.once('error', reject);
    child.once('exit', (code) => resolve({ code, tail, seconds: (performance.now() - t0) / 1000 }));
  });
}

const seconds: Record<string, number> = {};
afterAll(() => {
  const total = Object.values(seconds).reduce((a, b) => a + b, 0);
  process.stdout.write(
    `bench smoke: ${Object.entries(seconds)
      .map(([n, s]) => `${n} ${s.toFixed(0)} s`)
      .join(', ')}; ${total.toFixed(0)} s in all\n`,
  );
});

describe('every benchmark runs at its smoke size', () => {
  for (const [name, keys] of Object.entries(expected)) {
    // The sandbox needs a Docker engine: skipped only where the other sandbox tests are (MINDLOOP_TEST_NO_DOCKER=1).
    it.skipIf(name === 'sandbox' && dockerSkipped)(
      `${name} --smoke exits 0 and writes its keys`,
      { timeout: 600_000 },
      async () => {
        const r = await smoke(name);
        seconds[name] = r.seconds;
        expect(r.code, r.tail).toBe(0);
        const file = join(out.path, `${name}.json`);
        expect(existsSync(file), `${file} was not written:\n${r.tail}`).toBe(true);
        const result = JSON.parse(readFileSync(file, 'utf8')) as {
          name: string;
          smoke?: boolean;
          metrics: Record<string, unknown>;
        };
        expect(result).toMatchObject({ name, smoke: true });
        const notFinite = keys.filter(
          (k) => typeof result.metrics[k] !== 'number' || !Number.isFinite(result.metrics[k]),
        );
        expect(
          notFinite,
          `missing or not a finite number in ${name}.json: ${notFinite.map((k) => `${k}=${JSON.stringify(result.metrics[k])}`).join(', ')}`,
        ).toEqual([]);
        for (const k of named[name] ?? []) expect(typeof result.metrics[k], k).toBe('string');
      },
    );
  }
});
