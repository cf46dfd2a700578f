/**
 * `npm run bench -- <name>…` (no name: all). Each benchmark prints a table and writes
 * bench/results/<name>.json as `{name, at, machine, metrics}`.
 */
import { DefaultLogger, Runtime } from '@temporalio/worker';
import { benchStack, writeResult } from './lib.js';
import { measureBaseline } from './temporal-baseline.js';
import { defaultWorkflowCache } from '../env.js';
import { type HzRound, maxLagMs, measureAt1Hz, measureIdle, measureLedgerOverhead, measureReflexOverhead, measureTicks, measureTicksOnPostgres } from './tick.js';
import { measureSandbox } from './sandbox.js';
import { measureForks } from './fork.js';
import { measureSpawns } from './spawn.js';
import { measureLearnings } from './learnings.js';
import { measureNerves } from './nerves.js';
import { measureBus } from './bus.js';
import { compareTicks } from './tick-compare.js';
import { measureSpeech, withPreviousCpuRun, type SpeechDevice } from './speech.js';
import { measureCli } from './cli.js';
import { measureLocalTick } from './local-tick.js';
import { measurePeers } from './peers.js';

const hzRounds = (rounds: HzRound[], what: string) => rounds.map((r) => `${r.agents} ${what} p50 ${r.lagP50.toFixed(0)} / p99 ${r.lagP99.toFixed(0)} ms, ${r.ticksPerS.toFixed(0)} steps/s`).join('; ');

const benchmarks: Record<string, () => Promise<void>> = {
  async 'temporal-baseline'() {
    const { stack, stop } = await benchStack();
    try {
      const figures = await measureBaseline(stack);
      writeResult('temporal-baseline', { ...figures }, {
        activity_rt: 'workflow clock from scheduling a no-op activity to the workflow task that sees its result',
        workflow_rt: 'client wall clock from start to result of a no-op workflow',
        stack: 'embedded: Temporal CLI dev server (SQLite, WAL) + PGlite; one worker in this process',
      });
    } finally {
      await stop();
    }
  },
  async tick() {
    const { env, stack, stop } = await benchStack();
    try {
      const base = await measureBaseline(stack, { activities: 300, workflows: 50 });
      const t = await measureTicks(stack, env.MINDLOOP_TOOLS_DIR);
      // The same loop with the reflexes on (3 validators) vs off, alternating blocks in this run.
      const reflexes = await measureReflexOverhead(stack, env.MINDLOOP_TOOLS_DIR);
      // The same bare loop with the lifeforce ledger on vs off, alternating blocks in this run.
      const ledger = await measureLedgerOverhead(stack, env.MINDLOOP_TOOLS_DIR);
      // On the real Postgres, stacks of their own: worker memory with idle agents; how many agents keep the 1 s heartbeat.
      const idle = await measureIdle();
      const hz = await measureAt1Hz(env.MINDLOOP_TOOLS_DIR);
      const onPostgres = await measureTicksOnPostgres(env.MINDLOOP_TOOLS_DIR);
      writeResult(
        'tick',
        {
          ...t,
          ...idle,
          ...reflexes,
          ...ledger,
          ...hz.metrics,
          ...onPostgres,
          overhead_p50_ratio_to_activity_rt: t.overhead_p50_ms! / base.activity_rt_p50_ms,
          overhead_p99_ratio_to_activity_rt: t.overhead_p99_ms! / base.activity_rt_p50_ms,
          activity_rt_p50_ms: base.activity_rt_p50_ms,
        },
        {
          model: 'scripted, instant (no LLM time): what remains is the loop itself',
          overhead: 'wall time between consecutive recorded ticks of one agent, delay_ms 0, 180 ticks after warm-up',
          stacks: 'overhead_*, ticks_per_s_50_agents: the embedded stack (dev server + PGlite); the same keys ending in _pg: the dev server and the real Postgres (a scratch database), with that stack\'s own no-op activity round trip',
          rss: `VmRSS of a separate \`npm run worker -- --queue mindloop\` process hosting 500, then 2 000 idle agent workflows (real Postgres, a scratch database; its own dev server), its sticky cache at MINDLOOP_WORKFLOW_CACHE (default ${defaultWorkflowCache}): idle agents past it wait out of memory and are replayed when woken; idle_wake_*: a note to the first agent (evicted) and the last (cached) until its next tick is recorded; target <= 1.5 GB at 2 000`,
          at_1hz: `real Postgres (scratch database) + dev server, one in-process worker with the product's defaults; rounds of N agents pacing 1 s between ticks (12 ticks each, instant model, reflexes off); lag = gap between an agent's consecutive recorded ticks − 1 s, from its third tick; agents_at_1hz = the largest N whose p99 lag <= ${maxLagMs} ms. Rounds: ${hzRounds(hz.rounds, 'agents')}`,
          floor_1hz: `the same dev server, after the agents: N bare workflows, each step a no-op local activity then a 1 s timer (what a paced tick with a local think costs Temporal alone); lag = the step's workflow task completed − its timer's start − 1 s (history times), from the second step; floor_workflows_at_1hz = the largest N whose p99 lag <= ${maxLagMs} ms; agents_at_1hz_ratio_to_floor = agents_at_1hz / floor_workflows_at_1hz. Rounds: ${hzRounds(hz.floor, 'workflows')}`,
          reflexes:
            'reflex_overhead_ratio = p50 tick overhead with the reflexes on (emotion + novelty mini-prompts, 3 scripted instant validators) / p50 with them off (bare_overhead_*), 4 alternating blocks of 60 ticks each, same run; target <= 2',
          ledger:
            'ledger_overhead_p50_ms = p50 tick overhead with every LLM call reserved and settled in the lifeforce ledger (a limited budget) − p50 with the ledger switched off, 4 alternating blocks of 60 bare ticks, same run; target <= 2 ms',
          targets: 'overhead p50 <= 1.5x the no-op activity round trip, >= 150 ticks/s with 50 agents, RSS <= 1.5 GB at 2 000 idle agents, agents_at_1hz 500 (compare floor_workflows_at_1hz: what Temporal alone holds here), reflex_overhead_ratio <= 2, ledger_overhead_p50_ms <= 2',
        },
      );
    } finally {
      await stop();
    }
  },
  async fork() {
    const { env, stack, stop } = await benchStack();
    try {
      const { metrics, notes } = await measureForks(stack, { dataDir: env.MINDLOOP_DATA_DIR });
      writeResult('fork', metrics, notes);
    } finally {
      await stop();
    }
  },
  async spawn() {
    const { env, stack, stop } = await benchStack();
    try {
      const { metrics, notes } = await measureSpawns(stack, { dataDir: env.MINDLOOP_DATA_DIR });
      writeResult('spawn', metrics, notes);
    } finally {
      await stop();
    }
  },
  async sandbox() {
    const { metrics, notes } = await measureSandbox();
    writeResult('sandbox', metrics, notes);
  },
  /** `npm run bench -- tick-compare --baseline=<git ref>`: the tick before and after, same run. */
  async 'tick-compare'() {
    const baseline = flags.get('baseline');
    if (!baseline) {
      process.stderr.write('tick-compare needs --baseline=<git ref> (the commit to compare with, e.g. --baseline=HEAD~3)\n');
      process.exit(2);
    }
    const { metrics, notes } = await compareTicks(baseline, Number(flags.get('rounds') ?? 3));
    writeResult('tick-compare', metrics, notes);
  },
  async learnings() {
    const { metrics, notes } = await measureLearnings();
    writeResult('learnings', metrics, notes);
  },
  async nerves() {
    const { metrics, notes } = await measureNerves();
    writeResult('nerves', metrics, notes);
  },
  async bus() {
    const { metrics, notes } = await measureBus();
    writeResult('bus', metrics, notes);
  },
  /** `npm run bench -- cli`: `mindloop status` / `note` as whole processes, beside the Temporal CLI. */
  async cli() {
    const { env, stack, stop } = await benchStack();
    try {
      const metrics = await measureCli(stack, env.MINDLOOP_TOOLS_DIR);
      writeResult('cli', metrics, {
        runs: 'each figure: 10 runs of the whole command as a process (node bin/mindloop.mjs …), start to exit, after one warm-up run; the agent is on the embedded stack with a slow heartbeat, and its notebook is served as by npm start',
        status: `status_*, note_*: as they answer beside npm start (through its notebook, which serves the same Temporal); *_direct_*: --direct, the command's own Temporal client (as where no notebook runs)`,
        targets: `status_p50_ms <= 300: ${metrics.status_p50_ms! <= 300 ? 'met' : 'missed'}; note_p50_ms <= 500: ${metrics.note_p50_ms! <= 500 ? 'met' : 'missed'}`,
        temporal_cli: 'temporal workflow describe of the same agent workflow (the Temporal CLI from .tools/), same run',
      });
    } finally {
      await stop();
    }
  },
  /** `npm run bench -- local-tick [--ticks=n]`: the demo agent's tick on the offline local model (CPU). */
  async 'local-tick'() {
    const { env, stack, stop } = await benchStack();
    try {
      const { metrics, notes } = await measureLocalTick(stack, env.MINDLOOP_TOOLS_DIR, { ticks: Number(flags.get('ticks') ?? 12) });
      writeResult('local-tick', metrics, notes);
    } finally {
      await stop();
    }
  },
  /** `npm run bench -- peers`: the same loop on LangGraph.js, DBOS, bare Temporal beside Mindloop's tick; crash-resume counts. */
  async peers() {
    const { metrics, notes } = await measurePeers();
    writeResult('peers', metrics, notes);
  },
  /** `npm run bench -- speech [--device=cuda]`: the speech engine's RTF, WER and queue wait (CPU by default). */
  async speech() {
    const device = (flags.get('device') ?? 'cpu') as SpeechDevice;
    const { metrics, notes } = await measureSpeech({ device });
    writeResult('speech', withPreviousCpuRun(device, metrics), notes);
  },
};

const args = process.argv.slice(2).filter((a) => a !== '--');
/** `--name=value` options (tick-compare's --baseline, --rounds; speech's --device). */
const flags = new Map(args.filter((a) => a.startsWith('--')).map((a) => a.slice(2).split('=') as [string, string]));
const names = args.filter((a) => !a.startsWith('--'));
const badFlag = [...flags.keys()].find((f) => !['baseline', 'rounds', 'device', 'ticks'].includes(f));
if (badFlag !== undefined) {
  process.stderr.write(`unknown option --${badFlag} (tick-compare takes --baseline=<git ref> and --rounds=<n>, speech --device=cpu|cuda)\n`);
  process.exit(2);
}
if (flags.has('device') && !['cpu', 'cuda'].includes(flags.get('device') ?? '')) {
  process.stderr.write(`--device must be cpu or cuda, got "${flags.get('device')}"\n`);
  process.exit(2);
}
if (flags.has('ticks') && !/^([3-9]|[1-9]\d)$/.test(flags.get('ticks') ?? '')) {
  process.stderr.write(`--ticks must be a whole number from 3 to 99, got "${flags.get('ticks')}"\n`);
  process.exit(2);
}
if (flags.has('rounds') && !/^[1-9]\d?$/.test(flags.get('rounds') ?? '')) {
  process.stderr.write(`--rounds must be a whole number from 1 to 99, got "${flags.get('rounds')}"\n`);
  process.exit(2);
}
const unknown = names.filter((n) => !(n in benchmarks));
if (unknown.length) {
  process.stderr.write(`unknown benchmark: ${unknown.join(', ')} (have: ${Object.keys(benchmarks).join(', ')})\n`);
  process.exit(2);
}
Runtime.install({ logger: new DefaultLogger('WARN') });
// No name: every benchmark but tick-compare (which needs a baseline to compare with).
for (const name of names.length ? names : Object.keys(benchmarks).filter((n) => n !== 'tick-compare')) {
  process.stdout.write(`▶ ${name}\n`);
  await benchmarks[name]!();
}
