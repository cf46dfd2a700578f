/**
 * Agent identity activities: the rows every agent-owned table hangs from.
 */
import { eq } from 'drizzle-orm';
import type { Db } from '../db/client.js';
import { agents } from '../db/schema/index.js';
import { ErrorType, nonRetryable } from './errors.js';

interface AgentDeps {
  db: Db;
}

interface AgentSummary {
  agentId: string;
  name: string;
  created: boolean;
  createdAt: string;
}

/** Activities over the `agents` table. */
export function createAgentActivities({ db }: AgentDeps) {
  return {
    /** Create the agent row if it does not exist; idempotent, so a retry finds the first attempt's row. */
    async ensureAgent(input: { agentId: string; name: string }): Promise<AgentSummary> {
      const inserted = await db
        .insert(agents)
        .values({ id: input.agentId, name: input.name })
        .onConflictDoNothing({ target: agents.id })
        .returning({ id: agents.id, name: agents.name, createdAt: agents.createdAt });
      const row =
        inserted[0] ??
        (
          await db
            .select({ id: agents.id, name: agents.name, createdAt: agents.createdAt })
            .from(agents)
            .where(eq(agents.id, input.agentId))
        )[0];
      if (!row) throw nonRetryable(ErrorType.Unexpected, `agent ${input.agentId} vanished between insert and select`);
      return { agentId: row.id, name: row.name, created: inserted.length > 0, createdAt: row.createdAt.toISOString() };
    },
  };
}
