/**
 * `mindloop tools mcp grant|revoke <agent> <server>.<tool>`: a person puts one MCP tool in the
 * agent's context (discovered now; listed in context 2 and bound natively from the next tick) or
 * takes it out (undiscovered: the server's "more tools" line counts it, and a discover_tools search
 * finds it again). Neither starts the server nor changes what the tool may do.
 */
import type { Command } from 'commander';
import { z } from 'zod';
import { agentIdArg, schemaArg } from './args.js';
import { requireAgent, withDb } from './client.js';

const out = (s: string): void => {
  process.stdout.write(`${s}\n`);
};

/** `<server>.<tool>`: a server name (a-z, 0-9, _ and -), a dot, the tool's name as the server lists it. */
export const mcpToolRefSchema = z
  .string()
  .regex(/^[a-z0-9][a-z0-9_-]{0,63}\.\S{1,128}$/, '<server>.<tool>, e.g. memory.read_graph')
  .transform((s) => {
    const dot = s.indexOf('.');
    return { server: s.slice(0, dot), tool: s.slice(dot + 1) };
  });

type ToolRef = z.infer<typeof mcpToolRefSchema>;

async function setDiscovered(agentId: string, ref: ToolRef, on: boolean): Promise<void> {
  const { setMcpToolDiscovered } = await import('../db/queries/mcp.js');
  const r = await withDb(async (db) => {
    await requireAgent(db, agentId);
    return setMcpToolDiscovered(db, agentId, ref.server, ref.tool, on);
  });
  const name = `${ref.server}.${ref.tool}`;
  if (r === 'no_server') throw new Error(`${agentId} has no MCP server named ${ref.server} (tools mcp list)`);
  if (r === 'no_tool') throw new Error(`MCP server ${ref.server} of ${agentId} lists no tool ${ref.tool}`);
  if (on)
    out(
      r === 'changed'
        ? `granted ${name} to ${agentId}: in its context from the next tick`
        : `${name} is already in ${agentId}'s context`,
    );
  else
    out(
      r === 'changed'
        ? `revoked ${name} from ${agentId}'s context (a discover_tools search finds it again)`
        : `${name} is not in ${agentId}'s context`,
    );
}

/** Adds `grant` and `revoke` to `mindloop tools mcp`. */
export function registerMcpGrantCommands(mcp: Command): void {
  mcp
    .command('grant')
    .description("put one of the agent's MCP tools in its context (as if it had found it by search)")
    .argument('<agent>', 'the agent', agentIdArg)
    .argument('<tool>', '<server>.<tool>', schemaArg('MCP tool', mcpToolRefSchema))
    .action((agentId: string, ref: ToolRef) => setDiscovered(agentId, ref, true));

  mcp
    .command('revoke')
    .description("take one of the agent's MCP tools out of its context (a search finds it again)")
    .argument('<agent>', 'the agent', agentIdArg)
    .argument('<tool>', '<server>.<tool>', schemaArg('MCP tool', mcpToolRefSchema))
    .action((agentId: string, ref: ToolRef) => setDiscovered(agentId, ref, false));
}
