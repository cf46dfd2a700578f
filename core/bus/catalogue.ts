/**
 * Mindloop's message types and their published stable generations. Generation N of a type is
 * `stable[N - 1]`; a published generation is a contract: never edit it (the stable-schema test
 * fails), add the next generation after staging it instead. Pure; no Node APIs.
 */
import { z } from 'zod';
import { SchemaRegistry } from './registry.js';
import type { BusNamespace } from './subjects.js';

const agentId = z.string().min(1).max(64);
const tick = z.number().int().min(0);
const shortText = (max: number) => z.string().max(max);

/** `low.agent.<id>`: one per tick of an agent's (or its task loop's) thinking. */
const heartbeatSignalV1 = z.strictObject({
  agent_id: agentId,
  tick,
  loop: z.enum(['main', 'task']),
  task_id: z.number().int().positive().optional(),
  /** `provider:model` that thought this tick. */
  model: shortText(200).optional(),
  /** The tick's reply was found recorded (an activity retry), not asked anew. */
  replayed: z.boolean(),
  lifeforce: z.strictObject({ charged: z.number(), available: z.number().nullable() }).optional(),
});

/** `high.agent.<id>.reply`: what the agent said at a tick, in brief. */
const agentReplyV1 = z.strictObject({
  agent_id: agentId,
  tick,
  summary: shortText(2000),
  model: shortText(200).optional(),
  commands: z.number().int().min(0),
  confidence: z.number().min(0).max(1).nullable(),
});

/** `high.agent.<id>.escalation`: the agent asked for (or was put up for) human or oversight review. */
const agentEscalationV1 = z.strictObject({
  agent_id: agentId,
  escalation_id: shortText(200).min(1),
  reason: shortText(2000),
  severity: z.enum(['low', 'medium', 'high', 'critical']).optional(),
  tick: tick.optional(),
});

/** `high.agent.<id>.verdict`: the validators' verdict on a tick. */
const agentVerdictV1 = z.strictObject({
  agent_id: agentId,
  tick,
  validation_mode: shortText(40),
  rating: z.number().nullable(),
  notes: z.array(shortText(500)).max(20),
});

/** `high.agent.<id>.learning`: a learning the agent saved. */
const agentLearningV1 = z.strictObject({
  agent_id: agentId,
  predicate: shortText(200).min(1),
  subject: shortText(200).optional(),
  object: shortText(2000).optional(),
  confidence: z.number().min(0).max(1),
});

/** `high.agent.<id>.message`: the agent sent a peer a message (stored as a note on the receiver). */
const agentMessageV1 = z.strictObject({
  agent_id: agentId,
  to: agentId,
  /** The receiver's note id. */
  note_id: z.number().int().positive(),
  tick,
  text: shortText(2000),
  priority: z.number().int().min(0).max(10),
  tags: z.array(shortText(64)).max(20),
});

/** `command.agent.<id>.note`: a note for the agent (its workflow's `addNote` update). */
const agentNoteV1 = z.strictObject({
  text: z.string().trim().min(1).max(16_000),
  priority: z.number().int().min(0).max(10).optional(),
  tags: z.array(z.string().min(1).max(40)).max(20).optional(),
  source: z.enum(['user', 'peer', 'system', 'human']).optional(),
  sender: shortText(200).optional(),
});

/** `command.agent.<id>.pause|resume`: the workflow's `pause` / `resume` signals. */
const agentPauseV1 = z.strictObject({ reason: shortText(500).optional() });
const agentResumeV1 = z.strictObject({ reason: shortText(500).optional() });

/** `meta.health.<component>`: a component's health, published when it changes (or on request). */
const healthStatusV1 = z.strictObject({
  component: shortText(64).min(1),
  status: z.enum(['ok', 'degraded', 'down']),
  detail: shortText(2000).optional(),
});

/**
 * `meta.health.buffer_drop`: a bounded buffer (the MCP bridge's heartbeat buffer) was full and
 * dropped its oldest messages since it last said so.
 */
const bufferDropV1 = z.strictObject({
  /** Who holds the buffer, e.g. `mcp-bridge:<session>`. */
  buffer: shortText(200).min(1),
  capacity: z.number().int().positive(),
  dropped: z.number().int().positive(),
  dropped_total: z.number().int().positive(),
});

/** `meta.attention.<topic>`: how much attention a topic gets (its subjects, a rate limit, a priority). */
const attentionConfigV1 = z.strictObject({
  topic: shortText(64).min(1),
  subjects: z.array(shortText(300).min(1)).max(50),
  priority: z.number().int().min(0).max(10),
  max_per_minute: z.number().int().positive().nullable(),
});

/** `dev.request.echo` and its answer on `dev.response.echo` (and the request's reply inbox). */
const echoRequestV1 = z.strictObject({ ping: z.string().max(4096) });
const echoResponseV1 = z.strictObject({
  pong: z.string().max(4096),
  timestamp: z.iso.datetime({ offset: true }),
  agent: z.literal('echo-v1'),
});

/** Every message type: its namespace and its stable generations in order (generation 1 first). */
export const messageCatalogue = {
  HeartbeatSignal: { namespace: 'low', stable: [heartbeatSignalV1] },
  AgentReply: { namespace: 'high', stable: [agentReplyV1] },
  AgentEscalation: { namespace: 'high', stable: [agentEscalationV1] },
  AgentVerdict: { namespace: 'high', stable: [agentVerdictV1] },
  AgentLearning: { namespace: 'high', stable: [agentLearningV1] },
  AgentMessage: { namespace: 'high', stable: [agentMessageV1] },
  AgentNote: { namespace: 'command', stable: [agentNoteV1] },
  AgentPause: { namespace: 'command', stable: [agentPauseV1] },
  AgentResume: { namespace: 'command', stable: [agentResumeV1] },
  HealthStatus: { namespace: 'meta', stable: [healthStatusV1] },
  BufferDrop: { namespace: 'meta', stable: [bufferDropV1] },
  AttentionConfig: { namespace: 'meta', stable: [attentionConfigV1] },
  EchoRequest: { namespace: 'dev', stable: [echoRequestV1] },
  EchoResponse: { namespace: 'dev', stable: [echoResponseV1] },
} as const satisfies Record<string, { namespace: BusNamespace; stable: readonly [z.ZodType, ...z.ZodType[]] }>;

/**
 * Schemas being tried out, by type and staging version (`<generation>.<n>-alpha|beta|rc`, the
 * generation being the type's latest stable one, 0 for a new type). They travel only on
 * `<root>.staging.*` and may change freely. Promoting one = moving it to the end of its type's
 * `stable` list above (what `SchemaRegistry.promote` does in memory) and recording it (see
 * test/bus/stable-schemas.test.ts). None at the moment.
 */
export const stagingCatalogue: Record<string, { namespace: BusNamespace; versions: Record<string, z.ZodType> }> = {};

export type BusMessageType = keyof typeof messageCatalogue;
type Last<T extends readonly unknown[]> = T extends readonly [...unknown[], infer L] ? L : never;
type Current<T extends BusMessageType> = Last<(typeof messageCatalogue)[T]['stable']>;
/** What a publisher of `T` passes (its current stable generation's input). */
export type BusPayloadIn<T extends BusMessageType> = z.input<Current<T>>;
/** What a consumer of `T` receives: any of its stable generations, parsed. */
export type BusPayloadOut<T extends BusMessageType> = z.output<(typeof messageCatalogue)[T]['stable'][number]>;

/** The command type behind each agent command subject. */
export const commandMessageTypes = {
  note: 'AgentNote',
  pause: 'AgentPause',
  resume: 'AgentResume',
} as const satisfies Record<string, BusMessageType>;
/** The event type behind each agent event subject. */
export const eventMessageTypes = {
  reply: 'AgentReply',
  escalation: 'AgentEscalation',
  verdict: 'AgentVerdict',
  learning: 'AgentLearning',
  message: 'AgentMessage',
} as const satisfies Record<string, BusMessageType>;

/**
 * A registry holding the catalogue's stable generations and staging versions. Each call builds
 * a fresh one, so a caller that stages or promotes changes only its own.
 */
export function catalogueRegistry(): SchemaRegistry {
  const registry = new SchemaRegistry();
  for (const [type, def] of Object.entries(messageCatalogue)) {
    registry.defineType(type, def.namespace);
    def.stable.forEach((schema, i) => registry.publishStable(type, i + 1, schema));
  }
  for (const [type, def] of Object.entries(stagingCatalogue)) {
    registry.defineType(type, def.namespace);
    for (const [version, schema] of Object.entries(def.versions)) registry.stage(type, version, schema);
  }
  return registry;
}
