import { DefaultLogger, Runtime } from '@temporalio/worker';
import { benchStack, scratchDatabase } from './lib.js';
import { measureTickCost, tickCostTable, tickCostMetrics } from './tick-cost.js';
Runtime.install({ logger: new DefaultLogger('WARN') });
const pgMode = process.argv.includes('--pg');
const scratch = pgMode ? await scratchDatabase('mindloop_h5_cost') : undefined;
const { env, stack, stop } = await benchStack(scratch ? { databaseUrl: scratch.url } : {});
try {
  const agents = Number(process.argv.find((a) => a.startsWith('--agents='))?.slice(9) ?? 10);
  const ticks = Number(process.argv.find((a) => a.startsWith('--ticks='))?.slice(8) ?? 30);
  const c = await measureTickCost(stack, env.MINDLOOP_TOOLS_DIR, {
    agents,
    ticks,
    reflexes: process.argv.includes('--reflexes'),
  });
  console.log(tickCostTable(c, pgMode ? 'postgres' : 'pglite'));
  console.log(JSON.stringify(tickCostMetrics(c)));
} finally {
  await stop();
  await scratch?.drop();
}
process.exit(0);
