/**
 * `npm run build:workflows -- [out.js]`: bundle the workflow code ahead of time (default
 * `.data/workflow-bundle.js`). Point MINDLOOP_WORKFLOW_BUNDLE at the file and workers start
 * without running webpack (production images, fast restarts). Rebuild after changing workflows/.
 */
import { mkdirSync, writeFileSync } from 'node:fs';
import { dirname, resolve } from 'node:path';
import { bundleWorkflows } from './queues.js';

/** Write the bundle to `out`; returns its absolute path and size. */
export async function writeWorkflowBundle(out: string): Promise<{ path: string; bytes: number }> {
  const path = resolve(out);
  const { code } = await bundleWorkflows();
  mkdirSync(dirname(path), { recursive: true });
  writeFileSync(path, code);
  return { path, bytes: Buffer.byteLength(code) };
}

if (process.argv[1] && resolve(process.argv[1]) === resolve(import.meta.filename)) {
  const args = process.argv.slice(2).filter((a) => a !== '--');
  if (args.length > 1 || args.some((a) => a.startsWith('-'))) {
    process.stderr.write('usage: npm run build:workflows -- [out.js]\n');
    process.exit(2);
  }
  const { path, bytes } = await writeWorkflowBundle(args[0] ?? '.data/workflow-bundle.js');
  process.stdout.write(
    `workflow bundle: ${path} (${Math.round(bytes / 1024)} KB); set MINDLOOP_WORKFLOW_BUNDLE=${path}\n`,
  );
}
