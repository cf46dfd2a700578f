// A worker process from its build: `node scripts/worker.mjs worker [flags]` runs workers/main.ts
// (`npm run worker`, the image's command), `node scripts/worker.mjs dev [flags]` runs
// workers/dev.ts (`npm start`). The build (.build/worker, scripts/cli-build.mjs) is made when a
// source changed since the last one; where it cannot be made, the sources run through tsx's
// loader instead, as they would without it. Stack traces name the sources either way.
import { pathToFileURL } from 'node:url';
import { buildEntries, freshEntry } from './cli-build.mjs';

const sources = { worker: '../workers/main.ts', dev: '../workers/dev.ts' };
const name = process.argv[2];
if (!(name in sources)) {
  process.stderr.write(`usage: node scripts/worker.mjs <${Object.keys(sources).join('|')}> [flags]\n`);
  process.exit(2);
}
// What the entry reads as its own arguments.
process.argv.splice(2, 1);
process.setSourceMapsEnabled(true);

let entry = freshEntry('worker', name);
if (entry === null) {
  try {
    process.stderr.write('[setup] building the worker (esbuild → .build/worker)…\n');
    entry = (await buildEntries('worker'))[name];
  } catch (err) {
    process.stderr.write(
      `mindloop: the worker's build failed (${String(err.message).split('\n')[0]}); running from the sources\n`,
    );
    const { register } = await import('tsx/esm/api');
    register();
    entry = new URL(sources[name], import.meta.url).pathname;
  }
}
await import(pathToFileURL(entry).href);
