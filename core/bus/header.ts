/**
 * The header every bus message carries, and the envelope it travels in. The message body is one
 * JSON object, `{ "header": {…}, "payload": {…} }`; the header is never split out into NATS
 * headers (the body alone is the message, so a log line or a stored message is complete). The
 * one NATS header set is `Nats-Msg-Id` = `header.message_id`, which JetStream uses to drop a
 * duplicate publish. Pure; no Node APIs.
 */
import { z } from 'zod';

/** Stable: `<generation>.0`. Staging: `<generation>.<n>-alpha|beta|rc[.<n>]`, e.g. `1.1-alpha`. */
export const stableVersionPattern = /^(\d{1,4})\.0$/;
export const stagingVersionPattern = /^(\d{1,4})\.([1-9]\d{0,3})-(alpha|beta|rc)(?:\.(\d{1,4}))?$/;
export const messageTypePattern = /^[A-Z][A-Za-z0-9]{0,63}$/;
// A message id is also the Temporal update id and JetStream's Nats-Msg-Id: printable, short.
export const messageIdPattern = /^[A-Za-z0-9][A-Za-z0-9_.:-]{0,127}$/;

export const busHeaderSchema = z.object({
  schema: z.object({
    generation: z.number().int().min(0).max(9999),
    version: z.string().max(32),
  }),
  message_type: z.string().regex(messageTypePattern, 'a PascalCase type name'),
  message_id: z.string().regex(messageIdPattern, 'letters, digits and "_.:-", at most 128 characters'),
  timestamp_real: z.iso.datetime({ offset: true }),
  /** The message this one answers (a response to a request), when it is one. */
  in_reply_to: z.string().regex(messageIdPattern).optional(),
  /** The deployment that sent it (one Temporal namespace's Mindloop); absent from senders that predate deployments. */
  deployment: z
    .string()
    .regex(/^[A-Za-z0-9_-]{1,64}$/)
    .optional(),
});
export type BusHeader = z.infer<typeof busHeaderSchema>;

export const busEnvelopeSchema = z.object({ header: z.unknown(), payload: z.unknown() });

/** The generation a version belongs to, and whether it is a stable or a staging version; null when it is neither. */
export function versionInfo(version: string): { generation: number; stage: 'stable' | 'staging' } | null {
  const stable = stableVersionPattern.exec(version);
  if (stable) return { generation: Number(stable[1]), stage: 'stable' };
  const staging = stagingVersionPattern.exec(version);
  if (staging) return { generation: Number(staging[1]), stage: 'staging' };
  return null;
}

/** The header of a new message; the caller brings the id and the clock (core has neither). */
export function makeHeader(o: {
  type: string;
  generation: number;
  version: string;
  messageId: string;
  timestamp: Date | string;
  inReplyTo?: string;
  deployment?: string;
}): BusHeader {
  return {
    schema: { generation: o.generation, version: o.version },
    message_type: o.type,
    message_id: o.messageId,
    timestamp_real: typeof o.timestamp === 'string' ? o.timestamp : o.timestamp.toISOString(),
    ...(o.inReplyTo ? { in_reply_to: o.inReplyTo } : {}),
    ...(o.deployment ? { deployment: o.deployment } : {}),
  };
}
