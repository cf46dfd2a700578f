/**
 * The whole domain schema, one module per table group. `db/client.ts` passes this module to
 * Drizzle and drizzle-kit reads it to generate `db/migrations/`.
 */
import { getTableName, type Table } from 'drizzle-orm';
import type { PgColumn, PgTable } from 'drizzle-orm/pg-core';
import { agentConfig, agentPeers, agentReputation, agents, ethicsPolicies, systemPrompts } from './agents.js';
import { agentFiles } from './agent-files.js';
import {
  discoveredTools,
  generatedToolsAudit,
  learningEvents,
  learnings,
  preferenceCounts,
  toolRegistry,
} from './autopoiesis.js';
import { campaignPhases, campaigns } from './campaigns.js';
import { embeddings, memoryVectors } from './embeddings.js';
import { forks, forkToolRegistry, verdicts } from './forks.js';
import { goalLinks, goals, tasks } from './goals.js';
import { lifeforceBudgets, lifeforceLedger } from './lifeforce.js';
import { llmCalls, llmRegistry, tickPrompts } from './llm.js';
import { maintenanceRuns } from './maintenance.js';
import { mcpCalls, mcpServers, mcpTools } from './mcp.js';
import { models } from './models.js';
import { nerveDecisions, nerveRuleEvents, nerveRules } from './nerves.js';
import {
  abstracts,
  concepts,
  diaryEntries,
  links,
  llmMemory,
  llmRecentResponses,
  notes,
  unverifiedFacts,
} from './memory.js';
import { decisionLog, escalations, partnershipMessages } from './oversight.js';
import { toolStates, toolTransitions } from './tools.js';
import { peerRatings, spawns } from './society.js';
import { antiStagnationMetrics, commandLog, processLog, stagnationStrategies, thinkingMethods } from './processes.js';

export * from './agents.js';
export * from './agent-files.js';
export * from './autopoiesis.js';
export * from './campaigns.js';
export * from './embeddings.js';
export * from './forks.js';
export * from './goals.js';
export * from './lifeforce.js';
export * from './llm.js';
export * from './maintenance.js';
export * from './mcp.js';
export * from './memory.js';
export * from './models.js';
export * from './nerves.js';
export * from './oversight.js';
export * from './processes.js';
export * from './relations.js';
export * from './society.js';
export * from './tools.js';

/** A table that carries a NOT NULL `agent_id` referencing `agents.id` ON DELETE CASCADE. */
export type AgentOwnedTable = PgTable & { agentId: PgColumn };

/**
 * Every table that belongs to one agent, in foreign-key order (a table comes after the
 * tables it references), so fork/clone copies can insert in this order and delete in reverse.
 * Not listed: `agents` itself, the shared `tool_registry`, `learnings` (its agent_id is
 * nullable: learnings may belong to a shard), the MCP tables (a server's processes and its
 * recorded calls belong to the agent that was granted it; a fork or clone starts without them), and
 * `memory_vectors` (a copy's rows get new ids; its index is rebuilt from the shared embeddings cache
 * by the catch-up of its first search or the backfill, without embedding anything again).
 */
export const agentOwnedTables = [
  agentConfig,
  systemPrompts,
  ethicsPolicies,
  agentPeers,
  agentReputation,
  peerRatings,
  llmRegistry,
  llmCalls,
  tickPrompts,
  goals,
  goalLinks,
  tasks,
  llmRecentResponses,
  llmMemory,
  diaryEntries,
  concepts,
  links,
  abstracts,
  notes,
  unverifiedFacts,
  processLog,
  commandLog,
  stagnationStrategies,
  antiStagnationMetrics,
  thinkingMethods,
  preferenceCounts,
  escalations,
  discoveredTools,
  generatedToolsAudit,
  decisionLog,
  partnershipMessages,
  toolStates,
  toolTransitions,
  campaigns,
  campaignPhases,
  forks,
  verdicts,
  lifeforceBudgets,
  lifeforceLedger,
  nerveDecisions,
  nerveRules,
  nerveRuleEvents,
  spawns,
  agentFiles,
] as const satisfies readonly AgentOwnedTable[];

/** Every table of the schema, in foreign-key order. */
export const allTables = [
  agents,
  models,
  toolRegistry,
  learnings,
  learningEvents,
  ...agentOwnedTables,
  forkToolRegistry,
  maintenanceRuns,
  mcpServers,
  mcpTools,
  mcpCalls,
  embeddings,
  memoryVectors,
] as const satisfies readonly Table[];

/** SQL names of `allTables`. */
export const tableNames: readonly string[] = allTables.map((t) => getTableName(t));
