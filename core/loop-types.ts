/**
 * Plain, serializable types shared by the agent-loop workflow, its activities and core logic.
 * Nothing here does I/O; everything crosses the workflow/activity boundary as JSON.
 */

/** A command as the LLM wrote it, after parsing and before validation against the catalogue. */
export interface ParsedCommand {
  cmdId: string;
  type: string;
  args: Record<string, unknown>;
  description?: string;
}

/** Something in the command block that could not become a command (kept, never crashes the tick). */
export interface CommandRejection {
  cmdId?: string;
  type?: string;
  raw: string;
  reason: string;
}

/**
 * A parsed command the catalogue refused (the think activity validates each command once):
 * applyCommands records it as a refused command, under its own cmd_id, with its args, its
 * status ('unknown' type or 'rejected' args) and the reason.
 */
export interface InvalidCommand extends ParsedCommand {
  status: 'unknown' | 'rejected';
  reason: string;
  /** How many of the tick's valid commands come before it in the reply: the reply's order is kept. */
  at: number;
}

/** Everything the parser extracts from one LLM reply. */
export interface ParsedReply {
  /** The reply with the command block removed. */
  body: string;
  commands: ParsedCommand[];
  rejected: CommandRejection[];
  /** `[confidence=0.6]…[/confidence]` spans. */
  confidenceTags: Array<{ confidence: number; text: string }>;
  /** The `UnverifiedFacts` JSON block. */
  unverifiedFacts: Array<{ fact: string; confidence: number; source?: string }>;
  /** The `Confidence: 0.8` line, if any (0..1). */
  confidence: number | null;
  /** Problems found while parsing (malformed JSON, missing end marker…). */
  errors: string[];
}

export type ContextMode = 'standard' | 'concentration' | 'meditation';
export type NotesMode = 'auto' | 'manual';

export interface TagFilter {
  tags?: string[];
  emotions?: string[];
  op?: 'and' | 'or';
}

/** How the loop changes itself in reaction to a command (applied by the workflow, in order). */
export type LoopEffect =
  | { kind: 'setResponses'; n: number }
  | { kind: 'setContextMode'; mode: ContextMode; filter?: TagFilter }
  | { kind: 'setNotesMode'; mode: NotesMode; filter?: { minPriority?: number; tags?: string[]; sources?: string[] } }
  | { kind: 'pause'; ticks: number }
  | { kind: 'idle'; on: boolean; wakeOn?: Array<'note' | 'process' | 'timeout'>; timeoutMs?: number }
  | { kind: 'startTaskLoop'; taskId: number; title: string; maxTicks?: number }
  | { kind: 'stopTaskLoop'; taskId: number }
  /**
   * `shell`: the loop runs `command` via sandboxRun (key = idempotency key) and records the result on process/cmd.
   * A designed tool's action (`tool.call`) is one too: it runs `argv` with `files` in the work dir, and `command`
   * is then only the line the agent reads.
   */
  | {
      kind: 'shell';
      processId: string;
      cmdId: string;
      key: string;
      command: string;
      timeoutMs?: number;
      argv?: string[];
      files?: Record<string, string>;
    }
  /** `values`: the new (validated) values, so the loop can apply them without a read. */
  | { kind: 'configChanged'; keys: string[]; values?: Record<string, unknown> }
  /** `escalate`, a held danger-zone command or tool action: start escalationWorkflow (`input` is its JSON input). */
  | { kind: 'escalate'; escalationId: string; input: Record<string, unknown> }
  /** `tools.generate`: start the Ouroboros workflow for a capability no registered tool has. */
  | { kind: 'generateTool'; capability: string; description: string; cmdId: string }
  /** `nerve.start`: start the nerve as the agent's child workflow `agent/<id>/nerve/<name>`. */
  | { kind: 'startNerve'; nerve: string; steps: number; seed: number; mode: string; cmdId: string }
  /** `speak`: start a speech workflow `speech/<agentId>/<tick>/<cmdId>` that says `text`. */
  | { kind: 'speak'; text: string; lang?: string; cmdId: string }
  /** `spawn`: start the spawn workflow `agent/<agentId>/spawn/<name>`, which gives birth to the descendant. */
  | {
      kind: 'spawn';
      type: 'clone' | 'trained' | 'newborn';
      name: string;
      goals?: string[];
      budget?: number;
      cmdId: string;
    }
  /** A note was delivered to another agent (a peer message): signal its loop `wake` so that an idle peer reads it. */
  | { kind: 'wakeAgent'; agentId: string }
  /**
   * `llm_task.ask`: after the command's transaction, the loop asks one model once (`registryId`,
   * or the role's failover) and the answer arrives as a note; `key` makes the call and the note idempotent.
   */
  | {
      kind: 'askLlm';
      cmdId: string;
      key: string;
      question: string;
      role: 'task' | 'agent';
      registryId?: number;
      model?: string;
    }
  /**
   * `stagnation_strategies.use`: the strategy was applied now; the loop measures its effect like an
   * automatic one (novelty after, two ticks on; not when the tick has no novelty) and gives its
   * `focus` to the next think.
   */
  | {
      kind: 'measureStrategy';
      strategyId: number;
      metricId: number;
      tick: number;
      noveltyBefore: number | null;
      focus?: string;
    }
  /**
   * `tools.mcp`: after the command committed, the loop calls the tool once (`mcpCall`, keyed by
   * `key`) and the result lands on the command's row and process entry for the next context.
   */
  | {
      kind: 'mcpCall';
      cmdId: string;
      processId: string;
      key: string;
      server: string;
      tool: string;
      args: Record<string, unknown>;
      /** The server's own prices as the command found them (absent: the activity looks them up first). */
      price?: McpCallPrice;
    };

/** An MCP server's own prices, LF (absent: the deployment's). */
export interface McpCallPrice {
  perCall?: number;
  perSecond?: number;
}

/** Result of applying one command. `duplicate` means an earlier attempt already applied it. */
export interface CommandOutcome {
  cmdId: string;
  type: string;
  status: 'applied' | 'rejected' | 'unvalidated' | 'error' | 'unknown';
  /** Short, human-readable; the full result lives in `command_log.result`. */
  message: string;
  duplicate: boolean;
  effects: LoopEffect[];
}

/**
 * What `command_log.result` holds (jsonb) for every recorded command. `text` is the full
 * result of a read command (capped at 8 KB), shown in the next tick's context; `effects` are
 * kept so that a retried applyCommands returns the first attempt's effects.
 */
export interface CommandLogResult {
  message: string;
  text?: string;
  truncated?: boolean;
  effects: LoopEffect[];
}
