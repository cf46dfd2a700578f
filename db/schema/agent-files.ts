/**
 * Agent files applied (`mindloop apply -f`, the agent loop's file input): one row per apply that
 * changed something, with who applied it, when, the document as applied (canonical form) and
 * the diff printed. An agent's last row is the base of the next apply's three-way comparison.
 */
import { boolean, index, jsonb, pgTable, text } from 'drizzle-orm/pg-core';
import type { AgentDocument, DiffLine } from '../../core/agent-file/index.js';
import { agentId } from './agents.js';
import { createdAt, rowId } from './_columns.js';

export const agentFiles = pgTable(
  'agent_files',
  {
    id: rowId(),
    agentId: agentId(),
    /** The file as applied, in its canonical form. */
    document: jsonb('document').$type<AgentDocument>().notNull(),
    /** The changes written (and the drift kept, the conflicts overwritten), as printed. */
    diff: jsonb('diff').$type<DiffLine[]>().notNull(),
    /** Who applied it: the CLI's user, or `temporal-ui` for a workflow input. */
    appliedBy: text('applied_by').notNull(),
    /** Where the file came from (its path), when known. */
    source: text('source'),
    /** The deployment that applied it: an agent of another deployment is refused. */
    deployment: text('deployment'),
    /**
     * The caller's key for this apply (the loop's workflow id and update id): a retried activity
     * finds the first attempt's row instead of comparing again against what it wrote.
     */
    requestKey: text('request_key').unique('agent_files_request_key_uq'),
    /** Conflicts were overwritten with the file's values (`--overwrite-drift`). */
    overwroteDrift: boolean('overwrote_drift').notNull().default(false),
    ...createdAt,
  },
  (t) => [index('agent_files_agent_id_id_idx').on(t.agentId, t.id)],
);

export type AgentFileRow = typeof agentFiles.$inferSelect;
export type NewAgentFileRow = typeof agentFiles.$inferInsert;
