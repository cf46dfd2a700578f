/**
 * `npm run bench -- <name>…` (no name: all). Each benchmark prints a table and writes
 * bench/results/<name>.json in the format of shared/BENCH.md.
 */
import { DefaultLogger, Runtime } from '@temporalio/worker';
import { benchStack, writeResult } from './lib.js';
import { measureBaseline } from './temporal-baseline.js';

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
};

const names = process.argv.slice(2).filter((a) => a !== '--');
const unknown = names.filter((n) => !(n in benchmarks));
if (unknown.length) {
  process.stderr.write(`unknown benchmark: ${unknown.join(', ')} (have: ${Object.keys(benchmarks).join(', ')})\n`);
  process.exit(2);
}
Runtime.install({ logger: new DefaultLogger('WARN') });
for (const name of names.length ? names : Object.keys(benchmarks)) {
  process.stdout.write(`▶ ${name}\n`);
  await benchmarks[name]!();
}
