/**
 * A CLI command that touches the database prints what it has to say and nothing from `pg`: the
 * pool's busy-connection check counts its own statements instead of reading the client's
 * deprecated queue fields, which warned in every process.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { agents } from '../../db/schema/index.js';
import { migratedDatabase, type MigratedDatabase } from '../helpers/env.js';
import { repoRoot, run } from '../helpers/spawn.js';

const cli = `${repoRoot}/bin/mindloop.mjs`;
let h: MigratedDatabase;

beforeAll(async () => {
  h = await migratedDatabase('mindloop_cli_warnings', 2);
  await h.db.insert(agents).values({ id: 'ada', name: 'Ada' });
}, 60_000);
afterAll(async () => {
  await h?.dispose();
});

const ml = (...args: string[]) => run(process.execPath, [cli, ...args], { DATABASE_URL: h.url });

describe('the CLI on the database', () => {
  it('reads and writes with no deprecation warning on stderr', async () => {
    const write = await ml('feedback', 'ada', 'accept', 'tool.grep');
    expect(write.code, write.stderr).toBe(0);
    expect(write.stdout).toContain('accept "tool.grep" for ada: count 1');
    const read = await ml('lifeforce', 'show', 'ada');
    expect(read.code).toBe(1);
    expect(read.stderr).toContain('agent ada has no lifeforce budget yet');
    for (const r of [write, read]) {
      expect(r.stderr).not.toMatch(/DeprecationWarning|is deprecated/);
    }
  });
});
