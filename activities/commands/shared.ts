/**
 * What every command handler shares: the transaction it runs in, its result shape, the
 * failure it throws for a refused-but-valid command (not found, already exists…), and text
 * rendering helpers for read results.
 */
import type { ArgsOf, CommandType } from '../../core/catalogue.js';
import type { CommandLogResult, LoopEffect } from '../../core/loop-types.js';
import type { Db } from '../../db/client.js';
import type { CommandLogEntry } from '../../db/schema/index.js';
import type { PriceTable } from '../../core/lifeforce.js';
import type { DangerRule } from '../../core/danger-zones.js';
import type { AgentEventSink } from '../agent-events.js';
import type { AgentEmbedders } from '../embeddings/agent-embedder.js';

/** The transaction a command is applied in (its command_log row is in the same one). */
export type Tx = Parameters<Parameters<Db['transaction']>[0]>[0];

export interface HandlerContext {
  tx: Tx;
  agentId: string;
  tick: number;
  mode: 'main' | 'task';
  taskId?: number;
  workflowId?: string;
  /** The command_log key of this command (task-loop ids carry their `task<id>.` prefix). */
  logCmdId: string;
  /** The danger-zone rules in force (`tool.call` checks tool actions against them). */
  dangerRules?: readonly DangerRule[];
  /** Lifeforce prices (`shell` holds its sandbox run's worst case). */
  prices: PriceTable;
  /** The escalation whose human approved this command: what it held runs now instead of being held again. */
  approvedBy?: string;
  /** Told of what a command did (a peer message) once its transaction committed; see `HandlerResult.committed`. */
  events?: AgentEventSink;
  /** The agents' embedders (search by meaning); without them searches compare words. */
  embedders?: AgentEmbedders;
  /** The worker's pool: a search by meaning keeps its in-memory indexes under it, across commands. */
  searchIndexes?: Db;
}

export interface HandlerResult {
  /** Short (≤ 200 chars): returned in the CommandOutcome. */
  message: string;
  /** Full result of a read, shown in the next tick's context (capped at 8 KB when stored). */
  text?: string;
  effects?: LoopEffect[];
  /**
   * Runs once the command's transaction committed (never on a retry that finds it applied):
   * tells observers (the bus) of what is now durable. It must return at once; what it throws is logged.
   */
  committed?: () => void;
}

export type Handler<T extends CommandType> = (ctx: HandlerContext, args: ArgsOf<T>) => Promise<HandlerResult>;
export type HandlerMap<K extends CommandType> = { [T in K]: Handler<T> };
/** The command types of one family, e.g. `FamilyTypes<'diary'>`. */
export type FamilyTypes<F extends string> = Extract<CommandType, `${F}.${string}`>;

/** A valid command that can not be applied (missing row, name taken…): status 'error', rolled back. */
export class CommandError extends Error {
  override readonly name = 'CommandError';
}

export const maxResultText = 8 * 1024;
export const maxMessage = 200;

export function tagSuffix(tags: readonly string[]): string {
  return tags.length ? ` {${tags.join(', ')}}` : '';
}

/** A list result: "3 diary entries" plus one line per row. */
export function listResult(what: string, lines: string[]): HandlerResult {
  return { message: `${lines.length} ${what}`, text: lines.length ? lines.join('\n') : `(no ${what})` };
}

/** Escape LIKE wildcards so a search is a plain substring match. */
export function likePattern(query: string): string {
  return `%${query.replace(/[\\%_]/g, (c) => `\\${c}`)}%`;
}

export function notFound(what: string, id: number | string): never {
  throw new CommandError(`${what} #${id} not found`);
}

/** The text a command_log row contributes to the next tick's context. */
export function commandResultText(row: Pick<CommandLogEntry, 'status' | 'reason' | 'result'>): string {
  const r = row.result as Partial<CommandLogResult> | null;
  if (r && typeof r === 'object') return r.text ?? r.message ?? row.reason ?? '';
  return row.reason ?? (typeof row.result === 'string' ? row.result : '');
}
