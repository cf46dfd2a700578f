/**
 * One measurement of the tick, printed as a JSON line: the loop with the reflexes off and on
 * (measureReflexOverhead, alternating blocks) on a fresh embedded stack; `--smoke`: one short
 * block of each. `tick-compare` runs it in the current tree and in a baseline's, so it imports
 * only what both have.
 */
import { DefaultLogger, Runtime } from '@temporalio/worker';
import { benchStack } from './lib.js';
import { measureReflexOverhead } from './tick.js';

Runtime.install({ logger: new DefaultLogger('WARN') });
const { env, stack, stop } = await benchStack();
try {
  const sizes = process.argv.includes('--smoke') ? { blocks: 1, ticksPerBlock: 10 } : { blocks: 3, ticksPerBlock: 60 };
  const figures = await measureReflexOverhead(stack, env.MINDLOOP_TOOLS_DIR, sizes);
  process.stdout.write(`TICK_PROBE ${JSON.stringify(figures)}\n`);
} finally {
  await stop();
}
