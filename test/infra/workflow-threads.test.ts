/**
 * A worker process started as `npm start`, `npm run worker`, the image and the benchmarks start
 * it (scripts/workflow-threads.mjs preloaded) runs its workflows without the SDK's promise hook:
 * the `__stack_trace` query says stack traces are off, a workflow's failure still names its
 * source file, and MINDLOOP_WORKFLOW_STACK_TRACES=on gives the SDK's stack traces back. A
 * process started without the flags is the SDK's default, the same as with the switch on.
 */
import { writeFileSync } from 'node:fs';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { workflowThreadFlags } from '../../scripts/workflow-threads.mjs';
import { tempDir } from '../helpers/env.js';
import { run } from '../helpers/spawn.js';
import { bundle, fixtureWorkflowsPath, startDevTemporal, type DevTemporal } from '../helpers/temporal.js';

interface Seen {
  stackTrace: string | null;
  queryError: string | null;
  failureStack: string | null;
}

let temporal: DevTemporal;
const data = tempDir('workflow-threads');
const bundlePath = `${data.path}/fixture-bundle.js`;

beforeAll(async () => {
  temporal = await startDevTemporal('workflow-threads', fixtureWorkflowsPath);
  writeFileSync(bundlePath, (await bundle(fixtureWorkflowsPath)).code);
}, 120_000);

afterAll(async () => {
  await temporal?.stop();
  data.remove();
});

/** The probe as a worker process with `flags` before it; what it saw. */
async function probe(queue: string, flags: string[], env: Record<string, string> = {}): Promise<Seen> {
  const r = await run(
    process.execPath,
    [
      ...flags,
      '--import',
      'tsx',
      'test/fixtures/workflow-threads-probe.ts',
      temporal.server.address,
      bundlePath,
      queue,
    ],
    env,
    90_000,
  );
  expect(r.code, r.stderr).toBe(0);
  return JSON.parse(r.stdout.trim().split('\n').at(-1)!) as Seen;
}

const sourceOfFailure = /test\/fixtures\/workflows\/index\.ts:\d+/;

describe('workflow threads of a worker process', () => {
  it('run without the promise hook: the stack trace query says so, failures keep their source-mapped stacks', async () => {
    const seen = await probe('wt-preloaded', workflowThreadFlags);
    expect(seen.stackTrace).toBeNull();
    expect(seen.queryError).toMatch(/stack traces are not enabled/i);
    expect(seen.failureStack).toMatch(sourceOfFailure);
  }, 120_000);

  it('keep the SDK stack traces with MINDLOOP_WORKFLOW_STACK_TRACES=on, as a process without the flags does', async () => {
    for (const [queue, flags, env] of [
      ['wt-on', workflowThreadFlags, { MINDLOOP_WORKFLOW_STACK_TRACES: 'on' }],
      ['wt-default', [], {}],
    ] as const) {
      const seen = await probe(queue, [...flags], env);
      expect(seen.queryError, queue).toBeNull();
      expect(seen.stackTrace, queue).toMatch(/test\/fixtures\/workflows\/index\.ts:\d+/); // where sleepWorkflow sleeps
      expect(seen.failureStack, queue).toMatch(sourceOfFailure);
    }
  }, 200_000);
});
