/** DBOS Transact: the loop is a workflow, each step a `DBOS.runStep`; a crashed loop is recovered by `DBOS.launch()`. */
import { DBOS } from '@dbos-inc/dbos-sdk';
import { dbUrl, doStep, main } from './common.js';

const peerLoop = DBOS.registerWorkflow(
  async (loop: string, steps: number) => {
    for (let i = 0; i < steps; i++) await DBOS.runStep(() => doStep(loop, i), { name: 'step' });
    return steps;
  },
  { name: 'peerLoop' },
);

await main({
  async start() {
    // The same executor id (DBOS's default, `local`) in every process: launch recovers the
    // workflows a killed process left pending.
    DBOS.setConfig({ name: 'mindloop-peers', systemDatabaseUrl: dbUrl, logLevel: 'error' });
    await DBOS.launch();
  },
  async run(loop, steps, resume) {
    if (resume) await DBOS.retrieveWorkflow(loop).getResult();
    else await (await DBOS.startWorkflow(peerLoop, { workflowID: loop })(loop, steps)).getResult();
  },
  async stop() {
    await DBOS.shutdown();
  },
});
