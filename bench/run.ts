/**
 * `npm run bench -- <name>…` (no name: all but tick-compare and soak). Each benchmark prints a
 * table and writes bench/results/<name>.json as `{name, at, machine, metrics}`. `--smoke` runs
 * each at the smallest sizes that still go through its whole path and writes under
 * bench/results/smoke/ instead (`--out=<dir>`: elsewhere); `npm test` runs every one that way.
 */
import { DefaultLogger, Runtime } from '@temporalio/worker';
import { benchStack, resultsDir, smokeResultsDir, writeResult, type ResultOptions } from './lib.js';
import { baselineSizes, measureBaseline } from './temporal-baseline.js';
import { defaultWorkflowCache, loadEnvOrExit } from '../env.js';
import {
  type HzRound,
  maxLagMs,
  measureAt1Hz,
  measureIdle,
  measureLedgerOverhead,
  measureReflexOverhead,
  measureTicks,
  measureTicksOnPostgres,
  tickSizes,
} from './tick.js';
import { measureSandbox, sandboxSizes } from './sandbox.js';
import { forkSizes, measureForks } from './fork.js';
import { measureSpawns, spawnSizes } from './spawn.js';
import { learningsSizes, measureLearnings } from './learnings.js';
import { measureNerves, nervesSizes } from './nerves.js';
import { busSizes, measureBus } from './bus.js';
import { compareTicks } from './tick-compare.js';
import { measureSpeech, speechSizes, withPreviousCpuRun, type SpeechDevice } from './speech.js';
import { cliSizes, measureCli } from './cli.js';
import { measureLocalTick } from './local-tick.js';
import { measurePeers, peersSizes } from './peers.js';
import { measureSoak, soakSizes } from './soak.js';
import { mcpToolsSizes, runMcpTools } from './mcp-tools.js';
import { measureTokens, tokensSizes } from './tokens.js';
import { measureMemory, memorySizes } from './memory.js';
import { tickTargetsNote, tickTargetsTable } from './tick-targets.js';

const hzRounds = (rounds: HzRound[], what: string) =>
  rounds
    .map(
      (r) =>
        `${r.agents} ${what} p50 ${r.lagP50.toFixed(0)} / p99 ${r.lagP99.toFixed(0)} ms, ${r.ticksPerS.toFixed(0)} steps/s`,
    )
    .join('; ');

/** The results file of `name`, where this run writes them (a smoke run says so in its notes). */
function write(name: string, metrics: Record<string, number | string>, notes: Record<string, string> = {}): void {
  const smokeNote =
    "a --smoke run: the smallest sizes that go through the whole path, to show it runs; the keys are a full run's (those naming a size too), the figures are not measurements";
  writeResult(name, metrics, smoke ? { ...notes, smoke: smokeNote } : notes, out);
}

const benchmarks: Record<string, () => Promise<void>> = {
  async 'temporal-baseline'() {
    const { stack, stop } = await benchStack();
    try {
      const figures = await measureBaseline(stack, smoke ? baselineSizes.smoke : baselineSizes.full);
      write(
        'temporal-baseline',
        { ...figures },
        {
          activity_rt: 'workflow clock from scheduling a no-op activity to the workflow task that sees its result',
          workflow_rt: 'client wall clock from start to result of a no-op workflow',
          stack: 'embedded: Temporal CLI dev server (SQLite, WAL) + PGlite; one worker in this process',
        },
      );
    } finally {
      await stop();
    }
  },
  async tick() {
    const sizes = smoke ? tickSizes.smoke : tickSizes.full;
    const { env, stack, stop } = await benchStack();
    try {
      const base = await measureBaseline(stack, sizes.baseline);
      const t = await measureTicks(stack, env.MINDLOOP_TOOLS_DIR, sizes.ticks);
      // The same loop with the reflexes on (3 validators) vs off, alternating blocks in this run.
      const reflexes = await measureReflexOverhead(stack, env.MINDLOOP_TOOLS_DIR, sizes.alternating);
      // The same bare loop with the lifeforce ledger on vs off, alternating blocks in this run.
      const ledger = await measureLedgerOverhead(stack, env.MINDLOOP_TOOLS_DIR, sizes.alternating);
      // On the real Postgres, stacks of their own: worker memory with idle agents; how many agents keep the 1 s heartbeat.
      const idle = await measureIdle(sizes.idle);
      const hz = await measureAt1Hz(env.MINDLOOP_TOOLS_DIR, sizes.hz);
      const onPostgres = await measureTicksOnPostgres(env.MINDLOOP_TOOLS_DIR, sizes);
      const metrics = {
        ...t,
        ...idle,
        ...reflexes,
        ...ledger,
        ...hz.metrics,
        ...onPostgres,
        overhead_p50_ratio_to_activity_rt: t.overhead_p50_ms! / base.activity_rt_p50_ms,
        overhead_p99_ratio_to_activity_rt: t.overhead_p99_ms! / base.activity_rt_p50_ms,
        activity_rt_p50_ms: base.activity_rt_p50_ms,
      };
      process.stdout.write(`${tickTargetsTable(metrics)}\n`);
      write('tick', metrics, {
        model: 'scripted, instant (no LLM time): what remains is the loop itself',
        overhead: `wall time between consecutive recorded ticks of one agent, delay_ms 0, ${sizes.ticks.soloTicks - sizes.ticks.warmup - 1} ticks after warm-up; ticks_per_s_50_agents: ${sizes.ticks.agents} agents × ${sizes.ticks.agentTicks} ticks at once`,
        stacks:
          "overhead_*, ticks_per_s_50_agents: the embedded stack (dev server + PGlite); the same keys ending in _pg: the dev server and the real Postgres (a scratch database), with that stack's own no-op activity round trip",
        rss: `VmRSS of a separate \`npm run worker -- --queue mindloop\` process (as that runs it: from its build, on jemalloc where the system has it) hosting ${sizes.idle.totals.map((n) => Math.max(1, Math.round(n / sizes.idle.divisor))).join(', then ')} idle agent workflows (real Postgres, a scratch database; its own dev server), its sticky cache at MINDLOOP_WORKFLOW_CACHE (default ${defaultWorkflowCache}): idle agents past it wait out of memory and are replayed when woken; idle_wake_*: a note to the first agent (evicted) and the last (cached) until its next tick is recorded`,
        at_1hz: `real Postgres (scratch database) + dev server, one in-process worker with the product's defaults; rounds of N agents pacing 1 s between ticks (${sizes.hz.ticks} ticks each, instant model, reflexes off); lag = gap between an agent's consecutive recorded ticks − 1 s, from its third tick; agents_at_1hz = the largest N whose p99 lag <= ${maxLagMs} ms. Rounds: ${hzRounds(hz.rounds, 'agents')}`,
        floor_1hz: `the same dev server, after the agents: N bare workflows, each step a no-op local activity then a 1 s timer (what a paced tick with a local think costs Temporal alone); lag = the step's workflow task completed − its timer's start − 1 s (history times), from the second step; floor_workflows_at_1hz = the largest N whose p99 lag <= ${maxLagMs} ms; agents_at_1hz_ratio_to_floor = agents_at_1hz / floor_workflows_at_1hz. Rounds: ${hzRounds(hz.floor, 'workflows')}`,
        reflexes: `reflex_overhead_ratio = p50 tick overhead with the reflexes on (emotion + novelty mini-prompts, 3 scripted instant validators) / p50 with them off (bare_overhead_*), ${sizes.alternating.blocks} alternating blocks of ${sizes.alternating.ticksPerBlock} ticks each, same run`,
        ledger: `ledger_overhead_p50_ms = p50 tick overhead with every LLM call reserved and settled in the lifeforce ledger (a limited budget) − p50 with the ledger switched off, ${sizes.alternating.blocks} alternating blocks of ${sizes.alternating.ticksPerBlock} bare ticks, same run`,
        targets: tickTargetsNote(metrics),
      });
    } finally {
      await stop();
    }
  },
  async fork() {
    const { env, stack, stop } = await benchStack();
    try {
      const { metrics, notes } = await measureForks(stack, {
        dataDir: env.MINDLOOP_DATA_DIR,
        ...(smoke ? forkSizes.smoke : forkSizes.full),
      });
      write('fork', metrics, notes);
    } finally {
      await stop();
    }
  },
  async spawn() {
    const { env, stack, stop } = await benchStack();
    try {
      const { metrics, notes } = await measureSpawns(stack, {
        dataDir: env.MINDLOOP_DATA_DIR,
        ...(smoke ? spawnSizes.smoke : spawnSizes.full),
      });
      write('spawn', metrics, notes);
    } finally {
      await stop();
    }
  },
  async sandbox() {
    const { metrics, notes } = await measureSandbox(smoke ? sandboxSizes.smoke : sandboxSizes.full);
    write('sandbox', metrics, notes);
  },
  /** `npm run bench -- tick-compare --baseline=<git ref>`: the tick before and after, same run (a smoke run: against HEAD by default). */
  async 'tick-compare'() {
    const baseline = flags.get('baseline') ?? (smoke ? 'HEAD' : undefined);
    if (!baseline) {
      process.stderr.write(
        'tick-compare needs --baseline=<git ref> (the commit to compare with, e.g. --baseline=HEAD~3)\n',
      );
      process.exit(2);
    }
    const { metrics, notes } = await compareTicks(baseline, Number(flags.get('rounds') ?? (smoke ? 1 : 3)), { smoke });
    write('tick-compare', metrics, notes);
  },
  async learnings() {
    const { metrics, notes } = await measureLearnings(smoke ? learningsSizes.smoke : learningsSizes.full);
    write('learnings', metrics, notes);
  },
  async nerves() {
    const { metrics, notes } = await measureNerves(smoke ? nervesSizes.smoke : nervesSizes.full);
    write('nerves', metrics, notes);
  },
  async bus() {
    const { metrics, notes } = await measureBus(smoke ? busSizes.smoke : busSizes.full);
    write('bus', metrics, notes);
  },
  /** `npm run bench -- cli`: `mindloop status` / `note` as whole processes, beside the Temporal CLI. */
  async cli() {
    const { runs } = smoke ? cliSizes.smoke : cliSizes.full;
    const { env, stack, stop } = await benchStack();
    try {
      const metrics = await measureCli(stack, env.MINDLOOP_TOOLS_DIR, { runs });
      write('cli', metrics, {
        runs: `each figure: ${runs} runs of the whole command as a process (node bin/mindloop.mjs …), start to exit, after one warm-up run; the agent is on the embedded stack with a slow heartbeat, and its notebook is served as by npm start`,
        status: `status_*, note_*: as they answer beside npm start (through its notebook, which serves the same Temporal); *_direct_*: --direct, the command's own Temporal client (as where no notebook runs)`,
        targets: `status_p50_ms <= 300: ${metrics.status_p50_ms! <= 300 ? 'met' : 'missed'}; note_p50_ms <= 500: ${metrics.note_p50_ms! <= 500 ? 'met' : 'missed'}`,
        temporal_cli: 'temporal workflow describe of the same agent workflow (the Temporal CLI from .tools/), same run',
      });
    } finally {
      await stop();
    }
  },
  /** `npm run bench -- mcp-tools`: an MCP tool called through the agent's mcpCall activity vs a bare MCP client. */
  async 'mcp-tools'() {
    const { metrics, notes } = await runMcpTools(smoke ? mcpToolsSizes.smoke : mcpToolsSizes.full);
    write('mcp-tools', metrics, notes);
  },
  /** `npm run bench -- tokens`: a tick's prompt tokens and LF with the providers' prompt caching, before and after. */
  async tokens() {
    const { metrics, notes } = await measureTokens(smoke ? tokensSizes.smoke : tokensSizes.full);
    write('tokens', metrics, notes);
  },
  /** `npm run bench -- memory`: the offline embedder's speed and search by meaning over 100 000 diary rows, Postgres and PGlite. */
  async memory() {
    const { MINDLOOP_TOOLS_DIR } = loadEnvOrExit();
    const { metrics, notes } = await measureMemory(MINDLOOP_TOOLS_DIR, smoke ? memorySizes.smoke : memorySizes.full);
    write('memory', metrics, notes);
  },
  /** `npm run bench -- local-tick [--ticks=n]`: the demo agent's tick on the offline local model (CPU). */
  async 'local-tick'() {
    const { env, stack, stop } = await benchStack();
    try {
      const { metrics, notes } = await measureLocalTick(stack, env.MINDLOOP_TOOLS_DIR, {
        ticks: Number(flags.get('ticks') ?? (smoke ? 2 : 12)),
      });
      write('local-tick', metrics, notes);
    } finally {
      await stop();
    }
  },
  /** `npm run bench -- peers`: the same loop on LangGraph.js, DBOS, bare Temporal beside Mindloop's tick; crash-resume counts. */
  async peers() {
    const { metrics, notes } = await measurePeers(smoke ? peersSizes.smoke : peersSizes.full);
    write('peers', metrics, notes);
  },
  /** `npm run bench -- speech [--device=cuda]`: the speech engine's RTF, WER and queue wait (CPU by default). */
  async speech() {
    const device = (flags.get('device') ?? 'cpu') as SpeechDevice;
    const { metrics, notes, measured } = await measureSpeech({
      device,
      sizes: smoke ? speechSizes.smoke : speechSizes.full,
      cpuIfNoGpu: smoke,
    });
    write('speech', withPreviousCpuRun(measured, metrics, out.dir!), notes);
  },
  /** `npm run bench -- soak [--minutes=n]`: agents ticking for half an hour; worker memory, rows, histories, errors. */
  async soak() {
    const sizes = smoke ? soakSizes.smoke : soakSizes.full;
    const minutes = flags.has('minutes') ? Number(flags.get('minutes')) : sizes.minutes;
    const { metrics, notes } = await measureSoak({ ...sizes, minutes });
    write('soak', metrics, notes);
  },
};

const args = process.argv.slice(2).filter((a) => a !== '--');
/** Options that take a value (`--name=value` or `--name value`), and the switches. */
const valued = ['baseline', 'rounds', 'device', 'ticks', 'minutes', 'out'];
const switches = ['smoke'];
const flags = new Map<string, string>();
const names: string[] = [];
for (let i = 0; i < args.length; i++) {
  const a = args[i]!;
  if (!a.startsWith('--')) {
    names.push(a);
    continue;
  }
  const eq = a.indexOf('=');
  const key = a.slice(2, eq < 0 ? undefined : eq);
  if (switches.includes(key) && eq < 0) flags.set(key, '');
  else if (valued.includes(key)) flags.set(key, eq < 0 ? (args[++i] ?? '') : a.slice(eq + 1));
  else {
    process.stderr.write(
      `unknown option ${a} (tick-compare takes --baseline=<git ref> and --rounds=<n>, speech --device=cpu|cuda, local-tick --ticks=<n>, soak --minutes=<n>; every benchmark --smoke, and --out=<dir> for where the results go)\n`,
    );
    process.exit(2);
  }
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
if (flags.has('minutes') && !(Number(flags.get('minutes')) > 0 && Number(flags.get('minutes')) <= 24 * 60)) {
  process.stderr.write(
    `--minutes must be a number of minutes above 0 (at most a day), got "${flags.get('minutes')}"\n`,
  );
  process.exit(2);
}
if (flags.has('out') && !flags.get('out')) {
  process.stderr.write('--out needs a folder\n');
  process.exit(2);
}
/** `--smoke`: each benchmark at the smallest sizes that still go through its whole path, its results apart. */
const smoke = flags.has('smoke');
const out: ResultOptions = { dir: flags.get('out') ?? (smoke ? smokeResultsDir : resultsDir), smoke };
const unknown = names.filter((n) => !(n in benchmarks));
if (unknown.length) {
  process.stderr.write(`unknown benchmark: ${unknown.join(', ')} (have: ${Object.keys(benchmarks).join(', ')})\n`);
  process.exit(2);
}
Runtime.install({ logger: new DefaultLogger('WARN') });
// No name: every benchmark but tick-compare (which needs a baseline to compare with) and soak
// (half an hour); with --smoke, every one (tick-compare against HEAD).
const all = Object.keys(benchmarks).filter((n) => smoke || !['tick-compare', 'soak'].includes(n));
for (const name of names.length ? names : all) {
  process.stdout.write(`▶ ${name}${smoke ? ' (smoke)' : ''}\n`);
  await benchmarks[name]!();
}
