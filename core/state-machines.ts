/**
 * State machines as tools: a tool is data — states, the actions valid in
 * each state, where each action leads, and a description per state — plus one pure transition
 * function. An invalid action is an error that lists the actions valid in the current state,
 * so a small model can correct itself. Definitions are zod-validated so a designed tool
 * (request_state_machine_design) can be checked before it joins the catalogue.
 */
import { z } from 'zod';

const name = z
  .string()
  .regex(/^[a-z][a-z0-9_]{0,63}$/, 'expected snake_case (a letter, then letters, digits, _; max 64)');
const stateName = z.string().regex(/^[A-Z][A-Z0-9_]{0,63}$/, 'expected UPPER_CASE (max 64)');

const actionDefSchema = z.strictObject({
  /** The state the action leads to; omitted = stays in the current state. */
  to: stateName.optional(),
  description: z.string().min(1).max(500),
  /** Argument names → a one-line description (shown to the model). */
  args: z.record(z.string().regex(/^[a-z][a-zA-Z0-9_]{0,63}$/), z.string().max(200)).optional(),
});

const stateDefSchema = z.strictObject({
  description: z.string().min(1).max(500),
  actions: z.record(name, actionDefSchema),
});

export const stateMachineSchema = z
  .strictObject({
    name,
    description: z.string().min(1).max(1000),
    initial: stateName,
    states: z.record(stateName, stateDefSchema),
  })
  .superRefine((def, ctx) => {
    if (!def.states[def.initial])
      ctx.addIssue({
        code: 'custom',
        path: ['initial'],
        message: `initial state '${def.initial}' is not among the states`,
      });
    for (const [s, st] of Object.entries(def.states)) {
      for (const [a, act] of Object.entries(st.actions)) {
        if (act.to && !def.states[act.to])
          ctx.addIssue({
            code: 'custom',
            path: ['states', s, 'actions', a, 'to'],
            message: `unknown target state '${act.to}'`,
          });
      }
    }
  });
export type StateMachineDef = z.infer<typeof stateMachineSchema>;

type TransitionResult =
  | { ok: true; from: string; to: string; action: string }
  | { ok: false; from: string; action: string; validActions: string[]; error: string };

/** The actions valid in `state` (empty for an unknown state). */
export function validActions(def: StateMachineDef, state: string): string[] {
  return Object.keys(def.states[state]?.actions ?? {});
}

/** Apply `action` in `state`: the next state, or an error naming the valid actions. */
export function transition(def: StateMachineDef, state: string, action: string): TransitionResult {
  const st = def.states[state];
  if (!st) {
    // A stored state the definition no longer has (a new version): restart from the initial state.
    return {
      ok: false,
      from: state,
      action,
      validActions: validActions(def, def.initial),
      error: `${def.name}: unknown state '${state}'; the tool restarts in ${def.initial}`,
    };
  }
  const act = st.actions[action];
  if (!act) {
    const valid = validActions(def, state);
    return {
      ok: false,
      from: state,
      action,
      validActions: valid,
      error: `${def.name}: action '${action}' is not valid in state ${state}; valid actions: ${valid.length ? valid.join(', ') : '(none)'}`,
    };
  }
  return { ok: true, from: state, to: act.to ?? state, action };
}

/** The description a model sees: what the tool does, its current state and what it may do now. */
export function describeTool(def: StateMachineDef, state: string): string {
  const st = def.states[state] ?? def.states[def.initial]!;
  const current = def.states[state] ? state : def.initial;
  const lines = Object.entries(st.actions).map(([a, act]) => {
    const args = act.args ? `(${Object.keys(act.args).join(', ')})` : '()';
    return `- ${a}${args}${act.to && act.to !== current ? ` → ${act.to}` : ''}: ${act.description}`;
  });
  return `${def.description}\nCurrent state: ${current} — ${st.description}\nValid actions now:\n${lines.join('\n') || '- (none)'}`;
}

// --- built-in tools (four) ----------------------------------------------------------------------

/** The database tool: IDLE → CONNECTED → QUERY_READY; read-only queries on the agent's own rows. */
export const databaseTool: StateMachineDef = stateMachineSchema.parse({
  name: 'database',
  description: "Read-only queries on your own rows of the agent's tables (structured: table, columns, where, limit).",
  initial: 'IDLE',
  states: {
    IDLE: {
      description: 'not connected',
      actions: { connect: { to: 'CONNECTED', description: 'open a read-only session' } },
    },
    CONNECTED: {
      description: 'connected; no query run yet',
      actions: {
        list_tables: { description: 'the tables you may query and their columns' },
        query: {
          to: 'QUERY_READY',
          description: 'run a read-only query on your own rows',
          args: {
            table: 'table name',
            columns: 'column names (optional)',
            where: 'column → value equalities (optional)',
            limit: '1..100',
          },
        },
        disconnect: { to: 'IDLE', description: 'close the session' },
      },
    },
    QUERY_READY: {
      description: 'a result is ready; query again or disconnect',
      actions: {
        list_tables: { description: 'the tables you may query and their columns' },
        query: {
          description: 'run another read-only query',
          args: {
            table: 'table name',
            columns: 'column names (optional)',
            where: 'column → value equalities (optional)',
            limit: '1..100',
          },
        },
        disconnect: { to: 'IDLE', description: 'close the session' },
      },
    },
  },
});

/** What the agent knows of the catalogue: its discovered tools, and a search of the rest. */
const discoverToolsTool: StateMachineDef = stateMachineSchema.parse({
  name: 'discover_tools',
  description:
    'See the tools you have discovered; search the catalogue for others (escalate to be granted one) ' +
    "and your MCP servers' tools (found ones join your context).",
  initial: 'READY',
  states: {
    READY: {
      description: 'ready',
      actions: {
        list: { description: 'your discovered tools' },
        search: {
          description:
            'catalogue tools matching a word (not usable until granted), ' +
            'and MCP tools matching the words (usable from the next tick)',
          args: { query: 'a word or a few' },
        },
      },
    },
  },
});

/** Ask the oversight tier for help (an escalation workflow). */
const escalateTool: StateMachineDef = stateMachineSchema.parse({
  name: 'escalate',
  description: 'Escalate a task you cannot solve to the oversight tier.',
  initial: 'READY',
  states: {
    READY: {
      description: 'ready',
      actions: {
        escalate: {
          description: 'start an escalation (the answer arrives as a note)',
          args: {
            task: 'the task',
            category: 'statistics | code | visualization | state_machine_designer | general',
            context: 'what matters',
            what_i_tried: 'what you tried',
          },
        },
        list: {
          description: 'your recent escalations (id, category, status, decision, created), newest first',
          args: { limit: '1..50 (default 10)' },
        },
      },
    },
  },
});

/** Ask the oversight to design a new state-machine tool (spec + implementation + tests). */
const requestDesignTool: StateMachineDef = stateMachineSchema.parse({
  name: 'request_state_machine_design',
  description:
    'Ask the oversight tier to design a new state-machine tool; it is tested in the sandbox before it joins the catalogue.',
  initial: 'READY',
  states: {
    READY: {
      description: 'ready',
      actions: {
        request: {
          description: 'request a design (the result arrives as a note)',
          args: { capability: 'what the tool must do', context: 'why' },
        },
      },
    },
  },
});

export const builtinStateMachines: Record<string, StateMachineDef> = {
  database: databaseTool,
  discover_tools: discoverToolsTool,
  escalate: escalateTool,
  request_state_machine_design: requestDesignTool,
};
