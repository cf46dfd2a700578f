/**
 * One measurement of the tick, printed as a JSON line: the loop with the reflexes off and on
 * (measureReflexOverhead, alternating blocks) on a fresh embedded stack. `tick-compare` runs it
 * in the current tree and in a baseline's, so it imports only what both have.
 */
import { DefaultLogger, Runtime } from '@temporalio/worker';
import { benchStack } from './lib.js';
import { measureReflexOverhead } from './tick.js';

Runtime.install({ logger: new DefaultLogger('WARN') });
const { env, stack, stop } = await benchStack();
try {
  const figures = await measureReflexOverhead(stack, env.MINDLOOP_TOOLS_DIR, { blocks: 3, ticksPerBlock: 60 });
  process.stdout.write(`TICK_PROBE ${JSON.stringify(figures)}\n`);
} finally {
  await stop();
}
