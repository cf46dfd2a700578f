/**
 * LangGraph.js with the Postgres checkpointer: one node that loops on itself, one super-step per
 * step; `durability` is `sync` or the default `async` (argv[2] langgraph-sync / langgraph-async).
 * A crashed loop resumes by invoking again with the same thread_id.
 */
import { Annotation, END, START, StateGraph } from '@langchain/langgraph';
import { PostgresSaver } from '@langchain/langgraph-checkpoint-postgres';
import { doStep, main, peer, pool } from './common.js';

const durability = peer === 'langgraph-sync' ? 'sync' : 'async';
const State = Annotation.Root({
  loop: Annotation<string>,
  step: Annotation<number>,
  steps: Annotation<number>,
  last: Annotation<string>,
});
const saver = new PostgresSaver(pool);
const graph = new StateGraph(State)
  .addNode('think', async (s) => ({ last: await doStep(s.loop, s.step), step: s.step + 1 }))
  .addEdge(START, 'think')
  .addConditionalEdges('think', (s) => (s.step < s.steps ? 'think' : END))
  .compile({ checkpointer: saver });

await main({
  async start() {
    await saver.setup();
  },
  async run(loop, steps, resume) {
    const config = { configurable: { thread_id: loop }, recursionLimit: steps * 2 + 10, durability } as const;
    await graph.invoke(resume ? null : { loop, step: 0, steps }, config);
  },
  async stop() {},
});
