/**
 * Escalation and state-machine tool commands. `escalate` returns an `escalate` loop effect: the agent loop
 * starts escalationWorkflow as a child, and the answer comes back as a note. `tool.call` runs
 * one action of a discovered state-machine tool (activities/tools.ts: refusal when
 * undiscovered, valid actions listed when invalid, danger-zone actions held); a held action,
 * and the `escalate` / `request_state_machine_design` tools, become an escalation too.
 */
import { clipText } from '../../core/sanitize.js';
import { callTool, type ToolCallResult } from '../tools.js';
import type { Db } from '../../db/client.js';
import type { LoopEffect } from '../../core/loop-types.js';
import { and, eq } from 'drizzle-orm';
import { processLog, toolRegistry } from '../../db/schema/index.js';
import { budgetIds } from '../../core/lifeforce.js';
import { holdSandboxRun } from '../sandbox-charge.js';
import { CommandError, type HandlerContext, type HandlerMap } from './shared.js';
import { shellChargeKey } from './shell.js';

/** A business key from the command's place (agent, tick, cmd): a retried tick finds the same escalation. */
function escalationIdFor(agentId: string, tick: number, cmdId: string): string {
  return `${agentId.slice(0, 28)}.t${tick}.${cmdId.slice(0, 24)}`.replace(/[^A-Za-z0-9_.-]/g, '_');
}

function escalation(ctx: HandlerContext, input: Record<string, unknown>): Extract<LoopEffect, { kind: 'escalate' }> {
  const escalationId = escalationIdFor(ctx.agentId, ctx.tick, ctx.logCmdId);
  return { kind: 'escalate', escalationId, input: { ...input, escalationId, agentId: ctx.agentId, tick: ctx.tick } };
}

const str = (v: unknown) => (typeof v === 'string' ? v : v === undefined ? '' : JSON.stringify(v));

export const escalationHandlers: HandlerMap<'escalate' | 'tool.call'> = {
  async escalate(ctx, a) {
    const e = escalation(ctx, {
      task: a.task,
      category: a.category,
      context: a.context ?? {},
      whatITried: a.what_i_tried ?? '',
    });
    return {
      message: `escalated to the oversight (${a.category}) as ${e.escalationId}; the answer comes as a note`,
      effects: [e],
    };
  },

  async 'tool.call'(ctx, a) {
    // Inside the command's transaction: the transition and its log commit with the command_log row.
    const r: ToolCallResult = await callTool(
      { db: ctx.tx as unknown as Db, inTransaction: true, dangerRules: ctx.dangerRules },
      {
        agentId: ctx.agentId,
        tool: a.tool,
        action: a.action,
        args: a.args ?? {},
        key: `${ctx.workflowId ?? 'cmd'}/${ctx.tick}/${ctx.logCmdId}`,
      },
    );
    const text = JSON.stringify(r).slice(0, 8000);
    if (!r.ok && r.refused === 'held') {
      const e = escalation(ctx, {
        task: `approve ${a.tool}.${a.action} (${r.dangerFlags!.join(', ')})`,
        category: 'general',
        context: { tool: a.tool, action: a.action },
        proposal: { kind: 'tool', name: `${a.tool}.${a.action}`, args: a.args ?? {} },
        dangerFlags: r.dangerFlags,
        humanRequired: true,
      });
      return { message: `${r.error}; escalation ${e.escalationId} asks a human`, text, effects: [e] };
    }
    if (!r.ok) return { message: r.error.slice(0, 200), text };
    // Valid here: the tool checked the args (an invalid category is refused there, with the `escalate` command's error).
    const args = (r.output.args as Record<string, unknown> | undefined) ?? {};
    if (a.tool === 'escalate' && a.action === 'escalate') {
      const e = escalation(ctx, {
        task: str(args.task),
        category: args.category,
        context: (args.context as Record<string, unknown>) ?? {},
        whatITried: str(args.what_i_tried),
      });
      return { message: `escalated as ${e.escalationId}; the answer comes as a note`, text, effects: [e] };
    }
    if (a.tool === 'request_state_machine_design' && a.action === 'request') {
      const e = escalation(ctx, {
        task: `design a state-machine tool: ${str(args.capability)}`,
        category: 'state_machine_designer',
        context: { capability: args.capability, why: args.context },
      });
      return { message: `design requested as ${e.escalationId}; the result comes as a note`, text, effects: [e] };
    }
    if (a.tool === 'escalate' && a.action === 'list') {
      const n = (r.output.escalations as unknown[] | undefined)?.length ?? 0;
      return { message: `${n} recent escalation${n === 1 ? '' : 's'}`, text };
    }
    const designed = await designedToolRun(ctx, a.tool, r, args);
    if (typeof designed === 'string') return { message: clipText(designed, 200), text };
    if (designed)
      return {
        message: clipText(
          `${a.tool}.${a.action} → ${r.state}; its implementation runs in the sandbox as process '${designed.processId}', the output comes with the next context`,
          200,
        ),
        text,
        effects: [designed],
      };
    return { message: `${a.tool}.${a.action} → ${r.state}`, text };
  },
};

/**
 * The sandbox harness of a designed tool: loads its implementation (`run(state, action, args)`),
 * calls it with the action the state machine just allowed, prints its output as JSON, and fails
 * when the implementation lands in another state than the spec's transition.
 */
/** The most implementation + args a designed tool's sandbox run carries through history. */
export const maxInlineToolBytes = 48 * 1024;

/** The wall time a designed tool's action gets in the sandbox (its hold's worst case). */
const designedToolWallMs = 30_000;

const designedToolHarness = `import { readFileSync } from 'node:fs';
const input = JSON.parse(readFileSync(new URL('./input.json', import.meta.url), 'utf8'));
const tool = await import('./tool.mjs');
if (typeof tool.run !== 'function') {
  console.error('tool.mjs exports no run(state, action, args)');
  process.exit(2);
}
const output = await tool.run(input.from, input.action, input.args);
console.log(JSON.stringify({ from: input.from, action: input.action, to: input.to, output: output ?? null }));
if (typeof output === 'string' && input.states.includes(output) && output !== input.to) {
  console.error(\`the implementation went to \${output}; the spec's transition is \${input.from} → \${input.to}\`);
  process.exit(3);
}
`;

/**
 * A designed tool's action does what its implementation says, and only in the sandbox: after the
 * transition was allowed, a `shell` effect runs the implementation there (the agent loop's
 * sandboxRun, like the `shell` command) and its output reaches the next context. Built-in tools
 * act here and return null.
 */
async function designedToolRun(
  ctx: HandlerContext,
  tool: string,
  r: Extract<ToolCallResult, { ok: true }>,
  args: Record<string, unknown>,
): Promise<Extract<LoopEffect, { kind: 'shell' }> | string | null> {
  const [row] = await ctx.tx
    .select({ implementation: toolRegistry.implementation, spec: toolRegistry.spec })
    .from(toolRegistry)
    .where(and(eq(toolRegistry.name, tool), eq(toolRegistry.kind, 'designed')));
  if (!row?.implementation) return null;
  // The effect carries the code through workflow history (the loop's result, the sandbox run's
  // input): payloads there stay well under 64 KB.
  const size = Buffer.byteLength(row.implementation) + Buffer.byteLength(JSON.stringify(args));
  if (size > maxInlineToolBytes)
    return `${tool}.${r.action} → ${r.state}; its implementation was not run: ${Math.ceil(size / 1024)} KB is more than the ${maxInlineToolBytes / 1024} KB a sandbox run may carry`;
  const processId = `tool.t${ctx.tick}.${ctx.logCmdId}`;
  const command = clipText(`tool ${tool}.${r.action} ${JSON.stringify(args)} (${r.from} → ${r.state})`, 500);
  // Charged like a `shell`: its worst case is held here, in the command's transaction (a budget
  // that cannot cover it refuses the command, the transition included), and recordShellResult
  // settles the wall seconds it took under the same key.
  const held = await holdSandboxRun(ctx.tx, ctx.prices, {
    key: shellChargeKey(ctx.agentId, processId),
    budgetId: budgetIds.agent(ctx.agentId),
    wallMs: designedToolWallMs,
    cpus: 1,
    tick: ctx.tick,
    reason: command,
  });
  if (!held.ok)
    throw new CommandError(
      `lifeforce exhausted: ${tool}.${r.action}'s sandbox run needs ${held.needed} LF, the budget has ${held.available ?? 'unlimited'} LF (${held.reason})`,
    );
  await ctx.tx.insert(processLog).values({
    agentId: ctx.agentId,
    processId,
    kind: 'tool',
    name: clipText(command, 200),
    status: 'ok',
    message: 'queued for the sandbox',
    payload: { tool, action: r.action, from: r.from, to: r.state },
    tick: ctx.tick,
  });
  return {
    kind: 'shell',
    processId,
    cmdId: ctx.logCmdId,
    key: `${ctx.workflowId ?? `agent/${ctx.agentId}`}:tool:${ctx.tick}:${ctx.logCmdId}`,
    command,
    argv: ['node', 'run.mjs'],
    files: {
      'tool.mjs': row.implementation,
      'run.mjs': designedToolHarness,
      'input.json': JSON.stringify({
        from: r.from,
        action: r.action,
        to: r.state,
        args,
        states: row.spec.states ?? [],
      }),
      'package.json': '{"type":"module"}',
    },
    timeoutMs: designedToolWallMs,
  };
}

/** The escalation a danger-zone command becomes (activities/tick/apply-commands.ts holds it instead of running it). */
export function heldCommandEscalation(
  input: { agentId: string; tick: number },
  logCmdId: string,
  cmd: { cmdId: string; type: string; args: Record<string, unknown> },
  flags: string[],
): Extract<LoopEffect, { kind: 'escalate' }> {
  const escalationId = escalationIdFor(input.agentId, input.tick, logCmdId);
  return {
    kind: 'escalate',
    escalationId,
    input: {
      escalationId,
      agentId: input.agentId,
      tick: input.tick,
      task: `approve ${cmd.type} (${flags.join(', ')})`,
      category: 'general',
      context: { cmdId: cmd.cmdId },
      proposal: { kind: 'command', name: cmd.type, args: cmd.args },
      dangerFlags: flags,
      humanRequired: true,
    },
  };
}
