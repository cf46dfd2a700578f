/**
 * The fast lane's membership is computed from what each test file imports (test/helpers/lanes.ts):
 * a file that starts a server, a process or a bundle is in the slow suite, wherever it lives, and
 * a new pure file joins `npm test -- --unit` without anyone listing it.
 */
import { mkdirSync, writeFileSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import config from '../../vitest.config.js';
import { tempDir } from '../helpers/env.js';
import { laneOf, testFiles, unitTestFiles } from '../helpers/lanes.js';
import { repoRoot } from '../helpers/spawn.js';

describe('the lane of a test file', () => {
  const dir = tempDir('mindloop-lanes-');
  afterAll(() => dir.remove());
  const lane = (files: Record<string, string>): ReturnType<typeof laneOf> => {
    for (const [path, text] of Object.entries(files)) {
      mkdirSync(dirname(join(dir.path, path)), { recursive: true });
      writeFileSync(join(dir.path, path), text);
    }
    return laneOf(dir.path, Object.keys(files)[0]!);
  };

  it('is unit for pure imports, a port, a temp dir, types and a pure helper of the folder', () => {
    expect(
      lane({
        'test/a/pure.test.ts': [
          "import { describe } from 'vitest';",
          "import { parseReply } from '../../core/reply-parser.js';",
          "import { freePort, tempDir } from '../helpers/env.js';",
          "import type { Client } from '@temporalio/client';",
          "import { type Worker } from '@temporalio/worker';",
          "import { helper } from './helpers.js';",
          'const sample = "import { spawn } from \'node:child_process\'";',
        ].join('\n'),
        'test/a/helpers.ts': 'export const helper = (s: string) => s.trim();\n',
      }),
    ).toEqual({ lane: 'unit' });
  });

  it.each([
    ["import { migratedDatabase } from '../helpers/env.js';", 'test/helpers/env.ts (migratedDatabase)'],
    ["import { timeSkippingSuite } from '../helpers/temporal.js';", 'test/helpers/temporal.ts (timeSkippingSuite)'],
    ["import { testBus, testRoot } from '../helpers/nats.js';", 'test/helpers/nats.ts (testBus, testRoot)'],
    ["import { run } from '../helpers/spawn.js';", 'test/helpers/spawn.ts (run)'],
    ["import { TestWorkflowEnvironment } from '@temporalio/testing';", '@temporalio/testing (TestWorkflowEnvironment)'],
    ["import { Worker as W } from '@temporalio/worker';", '@temporalio/worker (Worker)'],
    ["import pg from 'pg';", 'pg (*)'],
    ["import * as db from '../../db/client.js';", 'db/client.ts (*)'],
    ["const { startStack } = await import('../../runtime/stack.js');", 'runtime/stack.ts (*)'],
  ])('is suite for %s', (line, because) => {
    expect(lane({ 'test/b/heavy.test.ts': line })).toEqual({ lane: 'suite', because });
  });

  it("follows a folder's own helper to the server it starts", () => {
    expect(
      lane({
        'test/c/uses.test.ts': "import { setUp } from './helpers.js';\n",
        'test/c/helpers.ts': "import { createDb } from '../../db/client.js';\nexport const setUp = () => createDb;\n",
      }),
    ).toEqual({ lane: 'suite', because: 'test/c/helpers.ts → db/client.ts (createDb)' });
  });
});

describe('the lanes of this tree', () => {
  const all = testFiles(repoRoot);
  const unit = unitTestFiles(repoRoot);

  it('puts the pure core tests in the unit lane and every server-backed folder in the suite', () => {
    expect(unit).toEqual(
      expect.arrayContaining([
        'test/core/reply-parser.test.ts',
        'test/core/lifeforce.test.ts',
        'test/infra/lanes.test.ts',
      ]),
    );
    // sanitize's tests write NUL bytes through a real Postgres: not a unit test though it lives in core/.
    expect(unit).not.toContain('test/core/sanitize.test.ts');
    expect(unit.filter((f) => /^test\/(integration|activities|db|sandbox)\//.test(f))).toEqual([]);
    expect(unit.length).toBeGreaterThan(20);
    expect(unit.length).toBeLessThan(all.length);
  });

  it('is what vitest runs: the unit project holds the unit lane and the other projects the rest, each file once', () => {
    const projects = (config.test?.projects ?? []) as Array<{
      test: { name: string; include: string[]; exclude?: string[] };
    }>;
    const unitProject = projects.find((p) => p.test.name === 'unit');
    expect(unitProject?.test.include).toEqual(unit);
    const suite = projects.find((p) => p.test.name === 'suite');
    expect(suite?.test.exclude).toEqual(expect.arrayContaining(unit));
  });
});
