// Preloaded into every Mindloop worker process (`node --import ./scripts/workflow-threads.mjs`);
// acts only in the Temporal SDK's workflow threads, which inherit the flag.
//
// The SDK collects a stack trace at every promise a workflow creates (a V8 promise hook that
// builds an Error and maps each of its frames through the bundle's source map), so that the
// `__stack_trace` query (the Temporal UI's "Stack Trace" tab) can show where a workflow waits.
// On an agent's tick (many small async steps) the hook took a third of the workflow thread's
// time, ~1.5 ms of CPU a tick (docs/sizing.md). Mindloop's workflows say where they wait
// themselves (their current details, the `status` query), so the hook is left out here; the
// workflows' own errors keep their source-mapped stacks. The query then answers that stack traces
// are not enabled on this worker. MINDLOOP_WORKFLOW_STACK_TRACES=on keeps the SDK's behaviour.
import { createRequire } from 'node:module';
import { fileURLToPath } from 'node:url';
import { isMainThread } from 'node:worker_threads';

/** The SDK's workflow thread script (its argv[1]): the only thread this changes. */
const workflowThread = /[\\/]@temporalio[\\/]worker[\\/]lib[\\/]workflow[\\/]workflow-worker-thread\.js$/;

if (
  !isMainThread &&
  workflowThread.test(process.argv[1] ?? '') &&
  process.env.MINDLOOP_WORKFLOW_STACK_TRACES !== 'on'
) {
  // The copy of the SDK this thread runs, resolved from its own script.
  const { globalHandlers } = createRequire(process.argv[1])('./vm-shared.js');
  // What the SDK installs on a thread's first workflow, less the promise hook: with no hook
  // installed, the workflows it creates report stack traces as disabled.
  globalHandlers.install = function installWithoutPromiseHook() {
    if (this.installed) return;
    this.overridePrepareStackTrace();
    this.installed = true;
  };
}

/** The node flags that preload this file: first on a worker process's command line. */
export const workflowThreadFlags = ['--import', fileURLToPath(import.meta.url)];
