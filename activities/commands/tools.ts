/**
 * `tools.generate` (Ouroboros): the agent asks for a capability. A registered tool
 * that already has it is named instead; otherwise the command returns a `generateTool` loop
 * effect and the agent loop starts toolGenerationWorkflow, whose result comes back as a note.
 */
import { and, eq } from 'drizzle-orm';
import { toolRegistry } from '../../db/schema/index.js';
import { mcpHandlers } from './mcp.js';
import type { FamilyTypes, HandlerMap } from './shared.js';

export const toolHandlers: HandlerMap<FamilyTypes<'tools'>> = {
  ...mcpHandlers,
  async 'tools.generate'(ctx, a) {
    const [existing] = await ctx.tx
      .select({ id: toolRegistry.id, name: toolRegistry.name, version: toolRegistry.version })
      .from(toolRegistry)
      .where(and(eq(toolRegistry.capability, a.capability), eq(toolRegistry.status, 'active')))
      .limit(1);
    if (existing) {
      const line = `tool ${existing.name} (#${existing.id}, v${existing.version}) already provides ${a.capability}`;
      return { message: line, text: line };
    }
    const cmdId = ctx.logCmdId;
    return {
      message: `generating a tool for ${a.capability}; a note will say when it is ready`,
      effects: [{ kind: 'generateTool', capability: a.capability, description: a.description, cmdId }],
    };
  },
};
