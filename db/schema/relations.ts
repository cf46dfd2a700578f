/**
 * Drizzle relations for the relational query API (`db.query.goals.findMany({ with: { tasks: true } })`).
 * They add no SQL; the foreign keys live on the tables.
 */
import { relations } from 'drizzle-orm';
import { agents } from './agents.js';
import { discoveredTools, toolRegistry } from './autopoiesis.js';
import { campaignPhases, campaigns } from './campaigns.js';
import { forks, verdicts } from './forks.js';
import { goalLinks, goals, tasks } from './goals.js';
import { llmCalls, llmRegistry } from './llm.js';
import { concepts, links } from './memory.js';
import { escalations, partnershipMessages } from './oversight.js';

export const agentsRelations = relations(agents, ({ one, many }) => ({
  parent: one(agents, { fields: [agents.parentId], references: [agents.id], relationName: 'descendants' }),
  children: many(agents, { relationName: 'descendants' }),
}));

export const goalsRelations = relations(goals, ({ many }) => ({
  tasks: many(tasks),
  childLinks: many(goalLinks, { relationName: 'parentGoal' }),
  parentLinks: many(goalLinks, { relationName: 'childGoal' }),
}));

export const goalLinksRelations = relations(goalLinks, ({ one }) => ({
  parent: one(goals, { fields: [goalLinks.parentGoalId], references: [goals.id], relationName: 'parentGoal' }),
  child: one(goals, { fields: [goalLinks.childGoalId], references: [goals.id], relationName: 'childGoal' }),
}));

export const tasksRelations = relations(tasks, ({ one }) => ({
  goal: one(goals, { fields: [tasks.goalId], references: [goals.id] }),
}));

export const conceptsRelations = relations(concepts, ({ many }) => ({
  outgoing: many(links, { relationName: 'fromConcept' }),
  incoming: many(links, { relationName: 'toConcept' }),
}));

export const linksRelations = relations(links, ({ one }) => ({
  from: one(concepts, { fields: [links.fromConceptId], references: [concepts.id], relationName: 'fromConcept' }),
  to: one(concepts, { fields: [links.toConceptId], references: [concepts.id], relationName: 'toConcept' }),
}));

export const llmRegistryRelations = relations(llmRegistry, ({ many }) => ({
  calls: many(llmCalls),
}));

export const llmCallsRelations = relations(llmCalls, ({ one }) => ({
  registry: one(llmRegistry, { fields: [llmCalls.registryId], references: [llmRegistry.id] }),
}));

export const escalationsRelations = relations(escalations, ({ many }) => ({
  messages: many(partnershipMessages),
}));

export const partnershipMessagesRelations = relations(partnershipMessages, ({ one }) => ({
  escalation: one(escalations, { fields: [partnershipMessages.escalationId], references: [escalations.id] }),
}));

export const toolRegistryRelations = relations(toolRegistry, ({ many }) => ({
  discoveries: many(discoveredTools),
}));

export const discoveredToolsRelations = relations(discoveredTools, ({ one }) => ({
  tool: one(toolRegistry, { fields: [discoveredTools.toolId], references: [toolRegistry.id] }),
}));

export const campaignsRelations = relations(campaigns, ({ many }) => ({
  phases: many(campaignPhases),
}));

export const campaignPhasesRelations = relations(campaignPhases, ({ one }) => ({
  campaign: one(campaigns, { fields: [campaignPhases.campaignId], references: [campaigns.id] }),
}));

export const forksRelations = relations(forks, ({ many }) => ({
  verdicts: many(verdicts, { relationName: 'forkVerdict' }),
}));

export const verdictsRelations = relations(verdicts, ({ one }) => ({
  fork: one(forks, { fields: [verdicts.forkId], references: [forks.id], relationName: 'forkVerdict' }),
}));
