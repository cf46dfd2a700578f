/**
 * `tools.mcp`: the command never calls the server here. The handler checks that the agent has the
 * server and the tool, that it has discovered the tool, and that the arguments keep to the server's allow-lists, holds a destructive
 * tool its entry does not allow for a human (an escalation, as a danger-zone command is held), registers a process-log entry and returns an `mcpCall` loop effect; the agent
 * loop then runs the `mcpCall` activity once, keyed by this command, and the result reaches the
 * next context on this command's row.
 */
import { clipText } from '../../core/sanitize.js';
import { argumentViolation, entryPrice, heldForHuman } from '../../core/mcp-policy.js';
import { processLog } from '../../db/schema/index.js';
import { mcpToolOf } from '../../db/queries/mcp.js';
import { heldCommandEscalation } from './escalations.js';
import { CommandError, type HandlerMap } from './shared.js';

/** The loop's idempotency key of one `tools.mcp`: workflow + tick + command. */
export function mcpCallKey(workflowId: string | undefined, agentId: string, tick: number, logCmdId: string): string {
  return `${workflowId ?? `agent/${agentId}`}:mcp:${tick}:${logCmdId}`;
}

export const mcpHandlers: HandlerMap<'tools.mcp'> = {
  async 'tools.mcp'(ctx, a) {
    const { agentId, tick, logCmdId } = ctx;
    const found = await mcpToolOf(ctx.tx, agentId, a.server, a.tool);
    if (!found.server) throw new CommandError(`you have no MCP server named ${a.server}`);
    if (!found.tool) throw new CommandError(`MCP server ${a.server} has no tool ${a.tool}`);
    // As with the house's tools, only what the agent has discovered (or was granted) is callable.
    if (!ctx.approvedBy && found.tool.discoveredAt === null)
      throw new CommandError(
        `you have not discovered ${a.server}.${a.tool}: find it with discover_tools search (or escalate to be granted it)`,
      );
    const args = a.args ?? {};
    // The entry's allow-lists are hard rules: a call outside them is refused, not held.
    const outside = argumentViolation(found.server.policy, args, process.cwd());
    if (outside) throw new CommandError(`${a.server}.${a.tool} refused: ${outside}`);
    if (!ctx.approvedBy && heldForHuman(a.tool, found.tool.annotations, found.server.policy)) {
      const e = heldCommandEscalation({ agentId, tick }, logCmdId, { cmdId: logCmdId, type: 'tools.mcp', args: a }, [
        'mcp_destructive_tool',
      ]);
      return {
        message: clipText(
          `${a.server}.${a.tool} is destructive: held for a human (escalation ${e.escalationId}); not called`,
          200,
        ),
        effects: [e],
      };
    }
    const processId = `mcp.t${tick}.${logCmdId}`;
    await ctx.tx.insert(processLog).values({
      agentId,
      processId,
      kind: 'mcp',
      name: clipText(`${a.server}.${a.tool}`, 200),
      status: 'ok',
      message: 'queued: the call runs after this tick',
      payload: { server: a.server, tool: a.tool },
      tick,
    });
    return {
      message: clipText(
        `${a.server}.${a.tool} called as process '${processId}'; its result comes with the next context`,
        200,
      ),
      effects: [
        {
          kind: 'mcpCall',
          cmdId: logCmdId,
          processId,
          key: mcpCallKey(ctx.workflowId, agentId, tick, logCmdId),
          server: a.server,
          tool: a.tool,
          args,
          // Passed in the open, so the call holds its price without looking the server up first.
          price: entryPrice(found.server.policy),
        },
      ],
    };
  },
};
