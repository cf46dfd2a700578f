// Workflows of the benchmarks: as small as possible, so they measure Temporal itself.
import { proxyActivities } from '@temporalio/workflow';

const { noop } = proxyActivities<{ noop(): Promise<void> }>({ startToCloseTimeout: '10 seconds' });

/** Completes at once. */
export async function noopWorkflow(): Promise<void> {}

/** Calls the no-op activity `n` times in a row; returns the workflow clock after each call. */
export async function activityRoundTripsWorkflow(n: number): Promise<number[]> {
  const marks = [Date.now()];
  for (let i = 0; i < n; i++) {
    await noop();
    marks.push(Date.now());
  }
  return marks;
}
