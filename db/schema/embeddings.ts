/**
 * The embeddings cache: one vector per (embedder model, text), keyed by the SHA-256 of the text so
 * a text is embedded once per model whoever asks. Shared by the whole deployment, like
 * `tool_registry`: a text's vector does not depend on the agent. Vectors are `real[]` (no vector
 * extension is required); their length always equals `dimensions`.
 */
import { sql } from 'drizzle-orm';
import { bigint, check, customType, index, integer, pgTable, primaryKey, real, text } from 'drizzle-orm/pg-core';
import { createdAt } from './_columns.js';
import { agentId } from './agents.js';

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

/** The memory rows an agent's vectors stand for (the table each `row_id` points into). */
export const memoryVectorKinds = ['diary', 'note', 'reply', 'concept', 'abstract'] as const;
export type MemoryVectorKind = (typeof memoryVectorKinds)[number];

/** `bytea`, read as a Buffer (node-postgres) or a Uint8Array (PGlite). */
const bytea = customType<{ data: Uint8Array; driverData: Uint8Array }>({ dataType: () => 'bytea' });

/**
 * The vector index kept beside the memory tables (no vector extension needed): for each memory row
 * and embedder model, the hash of the text that was embedded (its full vector is in `embeddings`)
 * and the vector quantized to one signed byte per dimension (`q[i] / 127 * scale` ≈ component i),
 * which a search scans without reading the full vectors. A row whose text changed has another
 * `text_sha256` and is embedded again.
 */
export const memoryVectors = pgTable(
  'memory_vectors',
  {
    agentId: agentId(),
    kind: text('kind', { enum: memoryVectorKinds }).notNull(),
    /** The id of the row in the kind's table (diary_entries, llm_memory, llm_recent_responses, concepts, abstracts). */
    rowId: bigint('row_id', { mode: 'number' }).notNull(),
    model: text('model').notNull(),
    dimensions: integer('dimensions').notNull(),
    textSha256: text('text_sha256').notNull(),
    /** The largest absolute component: the quantized bytes are scaled by it. */
    scale: real('scale').notNull(),
    q: bytea('q').notNull(),
    ...createdAt,
  },
  (t) => [
    primaryKey({ columns: [t.agentId, t.kind, t.rowId, t.model] }),
    index('memory_vectors_model_kind_idx').on(t.model, t.kind),
    check(
      'memory_vectors_kind_check',
      sql`${sql.identifier('kind')} in ('diary', 'note', 'reply', 'concept', 'abstract')`,
    ),
    check('memory_vectors_q_check', sql`length(${sql.identifier('q')}) = ${sql.identifier('dimensions')}`),
  ],
);

export type MemoryVector = typeof memoryVectors.$inferSelect;
