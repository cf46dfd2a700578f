/**
 * The MCP servers of an agent file (`tools.mcp`) against the database. Read back, every server
 * of the agent is an entry (those a person granted too: the file does not manage them until it
 * names them). Applied, a server that is new or reached differently is started once and listed
 * before anything is written (as `mindloop tools mcp add` does): one that does not start, is not
 * MCP or lists a bad tool refuses the whole file. A server whose entry changes only its policy
 * (allow-lists, prices, grants, `enabled`) is not started again.
 */
import { and, asc, eq, inArray, isNull } from 'drizzle-orm';
import { entryOfRow, grantedNames, rowOfEntry, sameConnection, type McpServerEntry } from '../core/mcp-policy.js';
import type { ItemDifference } from '../core/agent-file/index.js';
import type { Db } from '../db/client.js';
import { replaceTools, type McpToolRow } from '../db/queries/mcp.js';
import { mcpServers, mcpTools } from '../db/schema/index.js';
import { secretSource } from '../env.js';
import { specOf } from './mcp/index.js';
import { McpServerError, probeMcpServer, type McpListedTool, type McpServerSpec } from './mcp/pool.js';

type Tx = Parameters<Parameters<Db['transaction']>[0]>[0];
type Conn = Db | Tx;

/** Starts a server once and lists its tools (the real one starts a process or reaches a URL). */
export type McpProbe = (spec: McpServerSpec) => Promise<McpListedTool[]>;

export const probeWithWorkerEnv: McpProbe = (spec) => probeMcpServer(spec, { env: secretSource() });

const itemPrefix = 'tools.mcp[';

/** The server name of a `tools.mcp["name"]` item, or null for any other item. */
export function mcpItemName(key: string): string | null {
  return key.startsWith(itemPrefix) ? (JSON.parse(key.slice(itemPrefix.length, -1)) as string) : null;
}

/** The agent's MCP servers as file entries, by name. */
export async function readMcpEntries(q: Conn, agentId: string): Promise<McpServerEntry[]> {
  const rows = await q.select().from(mcpServers).where(eq(mcpServers.agentId, agentId)).orderBy(asc(mcpServers.name));
  return rows.map(entryOfRow);
}

/**
 * Start and list every server the differences add or reach differently, all at once; the tools
 * each listed, by server name. Throws one error naming every server that failed.
 */
export async function probeMcpChanges(
  list: readonly ItemDifference[],
  probe: McpProbe,
): Promise<{ listed: Map<string, McpListedTool[]>; problems: string[] }> {
  const todo = list.flatMap((d) => {
    const name = mcpItemName(d.key);
    if (name === null || d.file === undefined) return [];
    const next = rowOfEntry(d.file as McpServerEntry);
    const before = d.live === undefined ? null : rowOfEntry(d.live as McpServerEntry);
    return before && sameConnection(before, next) ? [] : [next];
  });
  const listed = new Map<string, McpListedTool[]>();
  const problems: string[] = [];
  await Promise.all(
    todo.map(async (v) => {
      try {
        listed.set(v.name, await probe(specOf(v)));
      } catch (err) {
        const why = err instanceof McpServerError || err instanceof Error ? err.message : String(err);
        problems.push(`tools.mcp[${JSON.stringify(v.name)}]: ${why}`);
      }
    }),
  );
  return { listed, problems: problems.sort() };
}

/** Write one `tools.mcp` item: the server removed, or stored with its policy (and its tools when it was listed now). */
export async function writeMcpItem(
  tx: Tx,
  agentId: string,
  name: string,
  entry: McpServerEntry | undefined,
  listed: McpListedTool[] | undefined,
): Promise<void> {
  if (!entry) {
    await tx.delete(mcpServers).where(and(eq(mcpServers.agentId, agentId), eq(mcpServers.name, name)));
    return;
  }
  const values = rowOfEntry(entry);
  const [row] = await tx
    .insert(mcpServers)
    .values({ agentId, source: 'file', ...values, ...(listed ? { listedAt: new Date() } : {}) })
    .onConflictDoUpdate({
      target: [mcpServers.agentId, mcpServers.name],
      set: { ...values, source: 'file', updatedAt: new Date(), ...(listed ? { listedAt: new Date() } : {}) },
    })
    .returning();
  if (listed) await replaceTools(tx, row!, listed as McpToolRow[]);
  // A grant the entry widens reaches the tools already listed.
  const names = grantedNames(values.policy);
  if (names !== 'all' && names.length === 0) return;
  await tx
    .update(mcpTools)
    .set({ discoveredAt: new Date() })
    .where(
      and(
        eq(mcpTools.serverId, row!.id),
        isNull(mcpTools.discoveredAt),
        names === 'all' ? undefined : inArray(mcpTools.name, [...names]),
      ),
    );
}
