/**
 * Reads folded into one statement decode to the rows Drizzle returns for each read on its own:
 * whole table rows (`rowsOf`) and a select's own fields, columns and aliased expressions
 * (`fieldRowsOf`).
 */
import { eq, sql } from 'drizzle-orm';
import { afterAll, beforeAll, expect, it } from 'vitest';
import { fieldRowsOf, jsonRows, rowsOf } from '../../db/json-rows.js';
import { agents, llmRecentResponses } from '../../db/schema/index.js';
import { migratedDatabase, type MigratedDatabase } from '../helpers/env.js';

let pg: MigratedDatabase;
beforeAll(async () => {
  pg = await migratedDatabase('mindloop_json_rows', 2);
  await pg.db.insert(agents).values({ id: 'j1', name: 'j1' });
  await pg.db.insert(llmRecentResponses).values([
    { agentId: 'j1', tick: 1, content: 'one', tags: ['a', 'b'], emotions: [{ emotion: 'joy', strength: 0.5 }] },
    { agentId: 'j1', tick: 2, content: 'two', contentHash: 'h2', archivedAt: new Date('2026-11-29T00:00:00Z') },
  ]);
});
afterAll(() => pg.dispose());

it('decodes a select of fields and a whole-row select as Drizzle returns them', async () => {
  const fields = {
    id: llmRecentResponses.id,
    tick: llmRecentResponses.tick,
    tags: llmRecentResponses.tags,
    emotions: llmRecentResponses.emotions,
    contentHash: llmRecentResponses.contentHash,
    updatedAt: llmRecentResponses.updatedAt,
    archived: sql<boolean>`${llmRecentResponses.archivedAt} is not null`.as('archived'),
  };
  const byFields = pg.db
    .select(fields)
    .from(llmRecentResponses)
    .where(eq(llmRecentResponses.agentId, 'j1'))
    .orderBy(llmRecentResponses.tick);
  const whole = pg.db
    .select()
    .from(llmRecentResponses)
    .where(eq(llmRecentResponses.agentId, 'j1'))
    .orderBy(llmRecentResponses.tick);
  const [folded] = await pg.db
    .select({ byFields: jsonRows(byFields).as('by_fields'), whole: jsonRows(whole).as('whole') })
    .from(sql`(values (1)) as one (n)`);
  const alone = await byFields;
  expect(alone).toHaveLength(2);
  expect(alone.map((r) => r.archived)).toEqual([false, true]);
  expect(fieldRowsOf<(typeof alone)[number]>(fields, folded!.byFields)).toEqual(alone);
  expect(rowsOf(llmRecentResponses, folded!.whole)).toEqual(await whole);
});
