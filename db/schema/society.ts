/**
 * A society of agents: spawned descendants (`spawns`) and the history of ratings agents give
 * their peers (`peer_ratings`, from which `agent_peers.trust` and `agent_reputation` follow).
 */
import { sql } from 'drizzle-orm';
import { bigint, check, index, integer, jsonb, pgTable, real, text, uniqueIndex } from 'drizzle-orm/pg-core';
import { agentId } from './agents.js';
import { createdAt, jsonbOf, oneOf, rowId, timestamps, tstz } from './_columns.js';

export const spawnTypes = ['clone', 'trained', 'newborn'] as const;
export const spawnStatuses = ['copying', 'ready', 'running', 'refused', 'rolled_back'] as const;

/**
 * One row per spawn a parent asked for (`agent_id` is the parent). `child_agent_id` is not a
 * foreign key: a spawn that rolled back leaves its record while the half-born child is gone.
 */
export const spawns = pgTable(
  'spawns',
  {
    id: rowId(),
    agentId: agentId(),
    childAgentId: text('child_agent_id').notNull(),
    type: text('type', { enum: spawnTypes }).notNull(),
    name: text('name').notNull(),
    status: text('status', { enum: spawnStatuses }).notNull().default('copying'),
    /** The child's generation: its parent's + 1. */
    generation: integer('generation').notNull(),
    goals: jsonbOf<string[]>('goals', []),
    /** Lifeforce carved from the parent's balance for the child (0: none). */
    budget: real('budget').notNull().default(0),
    /** Rows copied per table. */
    copied: jsonbOf<Record<string, number>>('copied', {}),
    rows: integer('rows').notNull().default(0),
    spawnMs: integer('spawn_ms'),
    reason: text('reason'),
    workflowId: text('workflow_id'),
    finishedAt: tstz('finished_at'),
    ...timestamps,
  },
  (t) => [
    uniqueIndex('spawns_child_agent_id_uq').on(t.childAgentId),
    index('spawns_agent_id_idx').on(t.agentId, t.createdAt),
    check('spawns_type_check', oneOf(t.type, spawnTypes)),
    check('spawns_status_check', oneOf(t.status, spawnStatuses)),
  ],
);

/** Every rating an agent gave a peer (−3…+3, with a reason); trust is derived from this history. */
export const peerRatings = pgTable(
  'peer_ratings',
  {
    id: rowId(),
    agentId: agentId(),
    peerAgentId: text('peer_agent_id').notNull(),
    dimension: text('dimension').notNull().default('overall'),
    score: integer('score').notNull(),
    reason: text('reason').notNull(),
    /** Where the rating came from: the agent's `reputation.rate`, a peer validation, a human. */
    source: text('source').notNull().default('agent'),
    tick: bigint('tick', { mode: 'number' }),
    detail: jsonb('detail').$type<Record<string, unknown>>(),
    ...createdAt,
  },
  (t) => [
    index('peer_ratings_agent_id_peer_idx').on(t.agentId, t.peerAgentId, t.createdAt),
    check('peer_ratings_score_check', sql`${sql.identifier('score')} between -3 and 3`),
  ],
);

export type Spawn = typeof spawns.$inferSelect;
export type NewSpawn = typeof spawns.$inferInsert;
export type PeerRating = typeof peerRatings.$inferSelect;
export type NewPeerRating = typeof peerRatings.$inferInsert;
