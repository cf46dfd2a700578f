/**
 * Business keys. An agent id becomes part of workflow ids (`agent/<id>`,
 * `agent/<id>/task/<taskId>`), so it may not contain slashes or spaces.
 */
import { z } from 'zod';

export const agentIdPattern = /^[A-Za-z0-9][A-Za-z0-9_.-]{0,63}$/;
export const agentIdSchema = z
  .string()
  .regex(agentIdPattern, 'letters, digits, ".", "-" and "_", starting with a letter or digit, at most 64 characters');

export const workflowIds = {
  agent: (agentId: string) => `agent/${agentId}`,
  task: (agentId: string, taskId: string | number) => `agent/${agentId}/task/${taskId}`,
  provision: (agentId: string) => `provision/${agentId}`,
  campaign: (id: string) => `campaign/${id}`,
  fork: (id: string) => `fork/${id}`,
  escalation: (id: string) => `escalation/${id}`,
  /** A tool generation: one at a time per agent and capability. */
  tool: (agentId: string, capability: string) => `tool/${agentId}/${capability}`,
  /** A descendant being born: one spawn per child name of a parent. */
  spawn: (parentId: string, childName: string) => `agent/${parentId}/spawn/${childName}`,
  /** A nerve of an agent: one run of it at a time. */
  nerve: (agentId: string, name: string) => `agent/${agentId}/nerve/${name}`,
  /**
   * A speech job of an agent: `speech/<id>/<tick>/<cmdId>` for its `speak` command,
   * `speech/<id>/note/<update>` for an audio note sent to its loop, `speech/<id>/cli/<uuid>` from the CLI.
   */
  speech: (agentId: string, ...parts: Array<string | number>) => `speech/${agentId}/${parts.join('/')}`,
} as const;
