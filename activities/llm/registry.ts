/**
 * The registry an agent gets when it has none: the offline local model, so `npm start` talks
 * with no key and no network.
 */
import { and, eq } from 'drizzle-orm';
import type { Db } from '../../db/client.js';
import { llmRegistry, type NewLlmRegistryEntry } from '../../db/schema/llm.js';
import type { ChatRole } from './types.js';

export const defaultLocalModelName = 'SmolLM2-135M-Instruct';

export interface DefaultRegistryOptions {
  /** `local` (default): the GGUF model in .tools/; `scripted`: the test double with these replies. */
  provider?: 'local' | 'scripted';
  replies?: string[];
  /** Roles to cover (default: agent only). */
  roles?: ChatRole[];
}

/**
 * Give `agentId` a default registry if it has no row at all; idempotent and safe to race
 * (unique agent_id + name). Returns whether rows were added.
 */
export async function ensureDefaultRegistry(
  db: Db,
  agentId: string,
  opts: DefaultRegistryOptions = {},
): Promise<{ created: boolean }> {
  const existing = await db
    .select({ id: llmRegistry.id })
    .from(llmRegistry)
    .where(eq(llmRegistry.agentId, agentId))
    .limit(1);
  if (existing.length > 0) return { created: false };
  const provider = opts.provider ?? 'local';
  const rows: NewLlmRegistryEntry[] = (opts.roles ?? ['agent']).map((role) => ({
    agentId,
    name: `default-${role}`,
    provider,
    model: provider === 'local' ? defaultLocalModelName : 'scripted',
    role,
    priority: 100,
    tier: 'small',
    // Greedy decoding makes a 135M model loop on one sentence; mild sampling keeps it moving.
    params:
      provider === 'scripted'
        ? opts.replies
          ? { replies: opts.replies }
          : {}
        : { temperature: 0.7, topP: 0.9, maxTokens: 256 },
  }));
  const inserted = await db.insert(llmRegistry).values(rows).onConflictDoNothing().returning({ id: llmRegistry.id });
  return { created: inserted.length > 0 };
}

/**
 * An agent with no `oversight` row gets the local model for that role (offline default; a
 * deployment registers a larger model, tests a scripted one). Idempotent.
 */
export async function ensureOversightModel(db: Db, agentId: string): Promise<{ created: boolean }> {
  const [row] = await db
    .select({ id: llmRegistry.id })
    .from(llmRegistry)
    .where(and(eq(llmRegistry.agentId, agentId), eq(llmRegistry.role, 'oversight')))
    .limit(1);
  if (row) return { created: false };
  const inserted = await db
    .insert(llmRegistry)
    .values({
      agentId,
      name: 'default-oversight',
      provider: 'local',
      model: defaultLocalModelName,
      role: 'oversight',
      priority: 100,
      tier: 'small',
      params: { temperature: 0.2, maxTokens: 512 },
    })
    .onConflictDoNothing()
    .returning({ id: llmRegistry.id });
  return { created: inserted.length > 0 };
}
