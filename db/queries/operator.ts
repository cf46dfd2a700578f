/**
 * What a person at the controls reads from Postgres (the CLI, the MCP bridge): the agents and
 * their latest replies.
 */
import { asc, desc, eq } from 'drizzle-orm';
import type { Db } from '../client.js';
import { agents, llmRecentResponses } from '../schema/index.js';

/** The agents in Postgres, by id: what they are, their state and their last tick. */
export function listAgents(db: Db, o: { limit?: number } = {}) {
  return db
    .select({
      id: agents.id,
      name: agents.name,
      kind: agents.kind,
      status: agents.status,
      operatingMode: agents.operatingMode,
      parentId: agents.parentId,
      lastTick: agents.lastTick,
      lastSeenAt: agents.lastSeenAt,
      createdAt: agents.createdAt,
    })
    .from(agents)
    .orderBy(asc(agents.id))
    .limit(o.limit ?? 200);
}

/** An agent's latest replies (one per tick), newest first. */
export function recentReplies(db: Db, agentId: string, limit: number) {
  return db
    .select({
      tick: llmRecentResponses.tick,
      content: llmRecentResponses.content,
      confidence: llmRecentResponses.confidence,
      novelty: llmRecentResponses.novelty,
      rating: llmRecentResponses.rating,
      validationMode: llmRecentResponses.validationMode,
      tags: llmRecentResponses.tags,
      createdAt: llmRecentResponses.createdAt,
    })
    .from(llmRecentResponses)
    .where(eq(llmRecentResponses.agentId, agentId))
    .orderBy(desc(llmRecentResponses.tick), desc(llmRecentResponses.id))
    .limit(limit);
}
