// Workflows of the benchmarks: as small as possible, so they measure Temporal itself.
import { proxyActivities, proxyLocalActivities, sleep } from '@temporalio/workflow';

const { noop } = proxyActivities<{ noop(): Promise<void> }>({ startToCloseTimeout: '10 seconds' });
const local = proxyLocalActivities<{ noop(): Promise<void> }>({ startToCloseTimeout: '10 seconds' });

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

/** `n` steps of a no-op local activity, `paceMs` apart: what a paced tick whose think is local costs Temporal alone. */
export async function pacedLocalWorkflow(n: number, paceMs: number): Promise<void> {
  for (let i = 0; i < n; i++) {
    await local.noop();
    await sleep(paceMs);
  }
}
