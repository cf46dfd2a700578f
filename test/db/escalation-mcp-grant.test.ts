/**
 * An escalation's answer that recommends one of the agent's MCP tools (`server.tool`) puts that
 * tool in the agent's context, once, as a person's grant would.
 */
import { and, eq } from 'drizzle-orm';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { grantEscalationTools } from '../../db/queries/escalations.js';
import { agents, mcpServers, mcpTools } from '../../db/schema/index.js';
import { migratedDatabase, type MigratedDatabase } from '../helpers/env.js';

let h: MigratedDatabase;

beforeAll(async () => {
  h = await migratedDatabase('escalation_mcp_grant', 2);
  await h.db.insert(agents).values([
    { id: 'ada', name: 'Ada' },
    { id: 'bo', name: 'Bo' },
  ]);
  for (const agentId of ['ada', 'bo']) {
    const [server] = await h.db
      .insert(mcpServers)
      .values({ agentId, name: 'files', transport: 'stdio', command: 'node', source: 'person' })
      .returning();
    await h.db.insert(mcpTools).values([
      { agentId, serverId: server!.id, name: 'read_file', discoveredAt: new Date() },
      { agentId, serverId: server!.id, name: 'write_file' },
    ]);
  }
});
afterAll(async () => {
  await h?.dispose();
});

const discovered = async (agentId: string) =>
  (
    await h.db
      .select({ name: mcpTools.name, at: mcpTools.discoveredAt })
      .from(mcpTools)
      .where(and(eq(mcpTools.agentId, agentId)))
  )
    .filter((t) => t.at !== null)
    .map((t) => t.name)
    .sort();

describe('an escalation that recommends an MCP tool', () => {
  it("discovers the agent's own tool by server.tool, once; other agents' and unknown names change nothing", async () => {
    const grant = () =>
      grantEscalationTools(h.db, {
        agentId: 'ada',
        escalationId: 'ada.t1.e1',
        category: 'general',
        recommended: ['files.write_file', 'files.nope', 'other.read_file', 'files.read_file'],
      });
    expect((await grant()).newly).toEqual(['files.write_file']);
    expect(await discovered('ada')).toEqual(['read_file', 'write_file']);
    expect(await discovered('bo')).toEqual(['read_file']);
    expect((await grant()).newly).toEqual([]);
  });
});
