/**
 * The tick's figures against their targets: `node --import tsx bench/tick-targets.ts [tick.json]`
 * (default bench/results/tick.json, what `npm run bench -- tick` wrote). A miss is printed as one.
 */
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { resultsDir } from './lib.js';

/** What each figure should be: at least (`min`) or at most (`max`). */
export const tickTargets: Array<{ key: string; what: string; min?: number; max?: number }> = [
  { key: 'agents_at_1hz_ratio_to_floor', what: 'agents at 1 Hz ÷ bare workflows at 1 Hz (same run)', min: 0.8 },
  {
    key: 'overhead_p50_ratio_to_activity_rt_pg',
    what: 'tick overhead p50 ÷ no-op activity round trip, Postgres',
    max: 1.2,
  },
  { key: 'overhead_p50_ratio_to_activity_rt', what: 'tick overhead p50 ÷ no-op activity round trip, PGlite', max: 2 },
  { key: 'ticks_per_s_50_agents_pg', what: 'ticks/s with 50 agents, Postgres', min: 150 },
  { key: 'ticks_per_s_50_agents', what: 'ticks/s with 50 agents, PGlite', min: 100 },
  { key: 'reflex_overhead_ratio', what: 'tick p50 with the reflexes ÷ without', max: 2 },
  { key: 'rss_mb_2000_idle_agents', what: 'worker RSS with 2 000 idle agents, MB', max: 1024 },
  { key: 'ledger_overhead_p50_ms', what: 'the lifeforce ledger on − off, p50 ms', max: 2 },
];

/** Each target with the figure measured and whether it is met (undefined: not measured). */
function verdicts(metrics: Record<string, number | null | undefined>) {
  return tickTargets.map((t) => {
    const v = metrics[t.key] ?? undefined; // a figure not measured is written as null
    const measured = v === undefined || Number.isNaN(v) ? undefined : v;
    const target = t.min !== undefined ? `>= ${t.min}` : `<= ${t.max}`;
    const met = measured === undefined ? undefined : t.min !== undefined ? measured >= t.min : measured <= t.max!;
    return { ...t, measured, target, verdict: met === undefined ? 'not measured' : met ? 'met' : 'MISSED' };
  });
}

export function tickTargetsTable(metrics: Record<string, number | null | undefined>): string {
  const lines = [`  ${'figure'.padEnd(60)} ${'measured'.padStart(9)} ${'target'.padStart(9)}  verdict`];
  for (const t of verdicts(metrics)) {
    const shown = t.measured === undefined ? '—' : t.measured.toFixed(2);
    lines.push(`  ${t.what.padEnd(60)} ${shown.padStart(9)} ${t.target.padStart(9)}  ${t.verdict}`);
  }
  return lines.join('\n');
}

/** The targets as one line for the results file's notes: `key target: measured, verdict; …`. */
export function tickTargetsNote(metrics: Record<string, number | null | undefined>): string {
  return verdicts(metrics)
    .map(
      (t) =>
        `${t.key} ${t.target}: ${t.measured === undefined ? '—' : +t.measured.toFixed(3)}, ${t.verdict.toLowerCase()}`,
    )
    .join('; ');
}

if (import.meta.url === `file://${process.argv[1]}`) {
  const file = process.argv[2] ?? join(resultsDir, 'tick.json');
  const { metrics } = JSON.parse(readFileSync(file, 'utf8')) as { metrics: Record<string, number> };
  process.stdout.write(`${file}\n${tickTargetsTable(metrics)}\n`);
}
