/**
 * The LLM activity family. Failover, accounting and idempotent replay live in the router;
 * this wraps it for Temporal: heartbeats while a model thinks, cancellation, and the
 * non-retryable `LlmUnavailable` failure that sends the workflow into Core Outage.
 */
import { ApplicationFailure } from '@temporalio/activity';
import { z } from 'zod';
import { parseInput } from '../errors.js';
import { activityContext, withHeartbeat } from '../heartbeat.js';
import { LlmUnavailable, LlmUnavailableError } from './errors.js';
import { activityRequestKey, createLlmRouter, type ChatRequest, type LlmRouter, type LlmRouterDeps } from './router.js';
import { chatRoles, type ChatResult } from './types.js';

export {
  LifeforceExhausted,
  LifeforceExhaustedError,
  LlmUnavailable,
  LlmUnavailableError,
  type LifeforceShortfall,
} from './errors.js';
export {
  activityRequestKey,
  callChargeKey,
  createLlmRouter,
  defaultLlmTimeoutMs,
  recordedToolCalls,
  rowsFor,
  type ChatRequest,
  type LedgerSwitch,
  type LlmRouter,
  type LlmRouterDeps,
} from './router.js';
export {
  defaultLocalModelName,
  ensureDefaultRegistry,
  ensureOversightModel,
  type DefaultRegistryOptions,
} from './registry.js';
export { ScriptedChatModel, scriptedTokens, type ScriptedReplyFn } from './providers/scripted.js';
export { defaultLocalThreads, disposeLocalModels, preloadLocalModel } from './providers/local.js';
export { chatRoles, nativeToolProviders } from './types.js';
export type * from './types.js';

/** A router to share, or what to build one from. */
type LlmActivityDeps = { router: LlmRouter } | LlmRouterDeps;

/** What a workflow passes to `llmChat`: plain JSON (no AbortSignal; cancellation comes from Temporal). */
type LlmChatInput = Omit<ChatRequest, 'signal'>;

const llmChatInput = z.object({
  agentId: z.string().min(1),
  role: z.enum(chatRoles),
  messages: z.array(z.object({ role: z.enum(['system', 'user', 'assistant']), content: z.string() })).min(1),
  params: z
    .object({
      temperature: z.number().optional(),
      topP: z.number().optional(),
      presencePenalty: z.number().optional(),
      frequencyPenalty: z.number().optional(),
      maxTokens: z.number().int().positive().optional(),
      stop: z.array(z.string()).optional(),
      jsonSchema: z.record(z.string(), z.unknown()).optional(),
    })
    .optional(),
  tick: z.number().int().min(0).optional(),
  idempotencyKey: z.string().min(1).max(500).optional(),
  workflowId: z.string().min(1).optional(),
  purpose: z.string().min(1).max(100).optional(),
  registryId: z.number().int().positive().optional(),
  tools: z
    .array(
      z.object({
        name: z.string().min(1).max(64),
        description: z.string(),
        parameters: z.record(z.string(), z.unknown()),
      }),
    )
    .max(128)
    .optional(),
});

/** LLM activities for the `mindloop` queue, built from their dependencies. */
export function createLlmActivities(deps: LlmActivityDeps) {
  const router = 'router' in deps ? deps.router : createLlmRouter(deps);

  return {
    /**
     * One chat call routed down the agent's registry for the role. Pass an idempotencyKey
     * (workflow id + tick + purpose) so a retry returns the stored reply instead of paying again.
     */
    async llmChat(input: LlmChatInput): Promise<ChatResult> {
      const request = parseInput('llmChat', llmChatInput, input);
      // Heartbeats carry cancellation to the activity and let a dead worker be noticed long
      // before startToCloseTimeout, while a slow CPU model is still generating.
      return withHeartbeat(
        async (signal) => {
          try {
            // A call with no key of its own is keyed by this activity: its retry pays once too.
            const idempotencyKey = request.idempotencyKey ?? activityRequestKey(request.purpose ?? 'llm_chat');
            return await router.chat({
              ...request,
              ...(idempotencyKey ? { idempotencyKey } : {}),
              workflowId: request.workflowId ?? activityContext()?.info.workflowExecution?.workflowId,
              signal,
            });
          } catch (err) {
            if (err instanceof LlmUnavailableError) {
              // Non-retryable: the workflow, not the retry policy, decides how to wait (Core Outage).
              throw ApplicationFailure.create({
                type: LlmUnavailable,
                message: err.message,
                nonRetryable: true,
                details: [{ agentId: err.agentId, role: err.role, attempts: err.attempts }],
              });
            }
            throw err;
          }
        },
        { details: { waitingFor: 'llm' } },
      );
    },
  };
}
