/**
 * Which embedder an agent's memory uses: the first enabled, not excluded `embedder` row of its
 * registry (by priority) that can be had, else the deployment's default (the offline
 * all-MiniLM-L6-v2, when the worker has the tools folder). The agent's `semantic_memory` setting
 * turns it off. Never throws: an embedder that cannot be had is reported with the reason, and the
 * caller falls back to comparing words.
 */
import { and, asc, eq } from 'drizzle-orm';
import type { Db } from '../../db/client.js';
import { agentConfig, llmRegistry, type LlmRegistryEntry } from '../../db/schema/index.js';
import type { EnvSource } from '../llm/providers/keys.js';
import { embedderOf, type EmbedderSpec } from './catalogue.js';
import { localEmbedderModel } from './local.js';
import type { Embedder } from './types.js';

export type EmbedderChoice =
  | { ok: true; embedder: Embedder; /** The registry row's name, or `default`. */ name: string }
  | {
      ok: false;
      /** `off`: the agent turned semantic memory off; `away`: it could not be had. */ why: 'off' | 'away';
      reason: string;
    };

export interface AgentEmbedderDeps {
  env: EnvSource;
  /** The tools folder (MINDLOOP_TOOLS_DIR): without it there is no offline default. */
  toolsDir?: string;
  timeoutMs?: number;
}

/** What the choice reads: the agent's settings and registry, as a tick's snapshot holds them. */
export interface EmbedderChoiceRows {
  config: Record<string, unknown>;
  registry: readonly Pick<
    LlmRegistryEntry,
    'id' | 'name' | 'provider' | 'model' | 'baseUrl' | 'apiKeyEnv' | 'role' | 'priority' | 'enabled' | 'excluded'
  >[];
}

export interface AgentEmbedders {
  /** The agent's embedder now, or why there is none; from `known` when the caller read them, else read now. */
  forAgent(db: Db, agentId: string, known?: EmbedderChoiceRows): Promise<EmbedderChoice>;
}

/** The agent's semantic_memory setting and its usable embedder rows, by priority (one query after another: `db` may be a transaction, one connection). */
async function readChoice(db: Db, agentId: string) {
  const setting = await db
    .select({ value: agentConfig.value })
    .from(agentConfig)
    .where(and(eq(agentConfig.agentId, agentId), eq(agentConfig.key, 'semantic_memory')));
  const rows = await db
    .select({
      name: llmRegistry.name,
      provider: llmRegistry.provider,
      model: llmRegistry.model,
      baseUrl: llmRegistry.baseUrl,
      apiKeyEnv: llmRegistry.apiKeyEnv,
    })
    .from(llmRegistry)
    .where(
      and(
        eq(llmRegistry.agentId, agentId),
        eq(llmRegistry.role, 'embedder'),
        eq(llmRegistry.enabled, true),
        eq(llmRegistry.excluded, false),
      ),
    )
    .orderBy(asc(llmRegistry.priority), asc(llmRegistry.id));
  return { semanticMemory: setting[0]?.value, rows };
}

/** The deployment's default embedder: the offline one. */
export const defaultEmbedderSpec: EmbedderSpec = {
  name: 'default',
  provider: 'local',
  model: localEmbedderModel,
  baseUrl: null,
  apiKeyEnv: null,
};

const specKey = (s: EmbedderSpec) => JSON.stringify([s.provider, s.model, s.baseUrl, s.apiKeyEnv]);
const message = (err: unknown) => (err instanceof Error ? err.message : String(err));

/**
 * Embedders are built once per distinct entry and shared by every agent that names it (the
 * offline one loads a model); one that failed is tried again on the next call.
 */
export function createAgentEmbedders(deps: AgentEmbedderDeps): AgentEmbedders {
  const built = new Map<string, Promise<Embedder>>();
  const build = (spec: EmbedderSpec): Promise<Embedder> => {
    const key = specKey(spec);
    let p = built.get(key);
    if (!p) {
      p = embedderOf(spec, deps);
      p.catch(() => built.delete(key));
      built.set(key, p);
    }
    return p;
  };
  return {
    async forAgent(db, agentId, known) {
      const { semanticMemory, rows } = known
        ? {
            semanticMemory: known.config.semantic_memory,
            rows: known.registry
              .filter((r) => r.role === 'embedder' && r.enabled && !r.excluded)
              .sort((a, b) => a.priority - b.priority || a.id - b.id),
          }
        : await readChoice(db, agentId);
      if (semanticMemory === 'off') return { ok: false, why: 'off', reason: 'semantic_memory is off' };
      const specs: EmbedderSpec[] = rows.length ? rows : deps.toolsDir ? [defaultEmbedderSpec] : [];
      if (specs.length === 0)
        return {
          ok: false,
          why: 'away',
          reason: 'no embedder: the agent names none and this worker has no offline one',
        };
      const errors: string[] = [];
      for (const spec of specs) {
        try {
          return { ok: true, embedder: await build(spec), name: spec.name };
        } catch (err) {
          errors.push(`${spec.name}: ${message(err)}`);
        }
      }
      return { ok: false, why: 'away', reason: errors.join('; ') };
    },
  };
}
