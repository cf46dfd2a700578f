#!/usr/bin/env node
// The `mindloop` CLI. It runs the compiled build in .build/cli/ (scripts/cli-build.mjs), made at
// set-up and remade here when a source changed since; where it cannot be built, the TypeScript
// sources run through tsx's loader instead.
import { pathToFileURL } from 'node:url';
import { buildCli, freshCliEntry } from '../scripts/cli-build.mjs';

let entry = freshCliEntry();
if (entry === null) {
  try {
    entry = (await buildCli()).entry;
  } catch (err) {
    process.stderr.write(
      `mindloop: the CLI build failed (${String(err.message).split('\n')[0]}); running from the sources\n`,
    );
    const { register } = await import('tsx/esm/api');
    register();
    entry = new URL('../cli/main.ts', import.meta.url).pathname;
  }
}
await import(pathToFileURL(entry).href);
