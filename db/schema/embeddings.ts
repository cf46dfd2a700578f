/**
 * The embeddings cache: one vector per (embedder model, text), keyed by the SHA-256 of the text so
 * a text is embedded once per model whoever asks. Shared by the whole deployment, like
 * `tool_registry`: a text's vector does not depend on the agent. Vectors are `real[]` (no vector
 * extension is required); their length always equals `dimensions`.
 */
import { sql } from 'drizzle-orm';
import { check, integer, pgTable, primaryKey, real, text } from 'drizzle-orm/pg-core';
import { createdAt } from './_columns.js';

const dimensions = sql.identifier('dimensions');

export const embeddings = pgTable(
  'embeddings',
  {
    /** The embedder's model id (e.g. `all-MiniLM-L6-v2`, or an OpenAI-compatible model name). */
    model: text('model').notNull(),
    dimensions: integer('dimensions').notNull(),
    /** Hex SHA-256 of the UTF-8 text. */
    textSha256: text('text_sha256').notNull(),
    vector: real('vector').array().notNull(),
    ...createdAt,
  },
  (t) => [
    primaryKey({ columns: [t.model, t.textSha256] }),
    check('embeddings_sha256_check', sql`${sql.identifier('text_sha256')} ~ '^[0-9a-f]{64}$'`),
    check(
      'embeddings_dimensions_check',
      sql`${dimensions} > 0 and cardinality(${sql.identifier('vector')}) = ${dimensions}`,
    ),
  ],
);

export type Embedding = typeof embeddings.$inferSelect;
