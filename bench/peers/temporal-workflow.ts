/** The bare Temporal loop: one activity per step, nothing else. */
import { proxyActivities } from '@temporalio/workflow';

const { step } = proxyActivities<{ step(loop: string, i: number): Promise<string> }>({
  // Short, so a step lost with a killed worker is retried within the crash test.
  startToCloseTimeout: '2s',
  retry: { initialInterval: '100ms' },
});

export async function peerLoopWorkflow(loop: string, steps: number): Promise<number> {
  for (let i = 0; i < steps; i++) await step(loop, i);
  return steps;
}
