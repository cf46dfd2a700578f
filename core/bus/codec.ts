/**
 * Turning a message into bytes on a subject and back, through the schema registry. A message a
 * consumer cannot take is refused with one of a few reasons and a detail naming what is wrong;
 * `RejectionCounter` keeps the counts a consumer reports. Pure: the caller brings the id, the
 * clock and the text encoding.
 */
import { formatIssues } from '../zod-issues.js';
import { busEnvelopeSchema, busHeaderSchema, makeHeader, versionInfo, type BusHeader } from './header.js';
import type { SchemaEntry, SchemaRegistry } from './registry.js';
import { placeOf } from './subjects.js';

export const rejectReasons = [
  'bad_json',
  'bad_envelope',
  'bad_header',
  'unknown_type',
  'unknown_version',
  'wrong_stage',
  'wrong_namespace',
  'unexpected_type',
  'bad_payload',
] as const;
export type RejectReason = (typeof rejectReasons)[number];

export interface DecodedMessage {
  subject: string;
  header: BusHeader;
  payload: unknown;
  entry: SchemaEntry;
}

export type DecodeResult = { ok: true; message: DecodedMessage } | { ok: false; reason: RejectReason; detail: string };

export class BusSchemaError extends Error {
  override readonly name = 'BusSchemaError';
  constructor(
    readonly reason: RejectReason,
    message: string,
  ) {
    super(message);
  }
}

function refuse(reason: RejectReason, detail: string): DecodeResult {
  return { ok: false, reason, detail };
}

/** Check that `entry` may travel on `subject`: staging versions only on staging subjects and the reverse, in the type's namespace. */
function placeProblem(
  root: string,
  subject: string,
  entry: Pick<SchemaEntry, 'type' | 'stage' | 'version' | 'namespace'>,
): { reason: RejectReason; detail: string } | null {
  const place = placeOf(root, subject);
  if (!place) return { reason: 'wrong_namespace', detail: `${subject} is not a subject under ${root}` };
  if (place.stage !== entry.stage) {
    return {
      reason: 'wrong_stage',
      detail:
        entry.stage === 'staging'
          ? `${entry.type} ${entry.version} is a staging version: it travels only on ${root}.staging.*`
          : `${entry.type} ${entry.version} is stable: it does not travel on ${root}.staging.*`,
    };
  }
  if (place.namespace !== entry.namespace)
    return { reason: 'wrong_namespace', detail: `${entry.type} travels in ${entry.namespace}, not ${place.namespace}` };
  return null;
}

/** Validate and parse a message received on `subject` (its body as text). */
export function decodeMessage(
  registry: SchemaRegistry,
  root: string,
  subject: string,
  text: string,
  expect?: readonly string[],
): DecodeResult {
  let json: unknown;
  try {
    json = JSON.parse(text);
  } catch (err) {
    return refuse('bad_json', `body is not JSON (${(err as Error).message.slice(0, 120)})`);
  }
  const env = busEnvelopeSchema.safeParse(json);
  if (!env.success || env.data.header === undefined)
    return refuse('bad_envelope', 'body is not {"header": {…}, "payload": {…}}');
  const h = busHeaderSchema.safeParse(env.data.header);
  if (!h.success) return refuse('bad_header', formatIssues(h.error, 'header', { under: 'header' }));
  const header = h.data;
  const info = versionInfo(header.schema.version);
  if (!info || info.generation !== header.schema.generation) {
    return refuse(
      'bad_header',
      `header.schema: version ${header.schema.version} does not belong to generation ${header.schema.generation} (stable: <g>.0, staging: <g>.<n>-alpha|beta|rc)`,
    );
  }
  const entry = registry.lookup(header.message_type, header.schema.generation, header.schema.version);
  if ('reason' in entry) return refuse(entry.reason, entry.detail);
  if (expect && !expect.includes(entry.type))
    return refuse('unexpected_type', `${entry.type} is not what this subscriber takes (${expect.join(', ')})`);
  const problem = placeProblem(root, subject, entry);
  if (problem) return refuse(problem.reason, problem.detail);
  const payload = entry.schema.safeParse(env.data.payload);
  if (!payload.success)
    return refuse(
      'bad_payload',
      `${entry.type} ${entry.version}: ${formatIssues(payload.error, 'payload', { under: 'payload' })}`,
    );
  return { ok: true, message: { subject, header, payload: payload.data, entry } };
}

export interface EncodeOptions {
  messageId: string;
  timestamp: Date | string;
  /** A staging version to send instead of the current stable generation. */
  version?: string;
  inReplyTo?: string;
  /** The sending deployment, carried in the header. */
  deployment?: string;
}

/** The schema a publisher of `type` uses: `version` when given, else the latest stable generation. */
function entryFor(registry: SchemaRegistry, type: string, version: string | undefined): SchemaEntry {
  const info = version === undefined ? undefined : versionInfo(version);
  const entry =
    version === undefined
      ? registry.latestStable(type)
      : info
        ? registry.lookup(type, info.generation, version)
        : undefined;
  if (entry && !('reason' in entry)) return entry;
  if (entry) throw new BusSchemaError(entry.reason, entry.detail);
  const unknownType = registry.lookup(type, 0, '0.0');
  if ('reason' in unknownType && unknownType.reason === 'unknown_type')
    throw new BusSchemaError('unknown_type', unknownType.detail);
  throw new BusSchemaError(
    'unknown_version',
    version === undefined
      ? `${type} has no stable generation`
      : `${type}: ${JSON.stringify(version)} is not a schema version`,
  );
}

/** Validate `payload` as `type` for `subject` and build the message body; a BusSchemaError names what is wrong. */
export function encodeMessage(
  registry: SchemaRegistry,
  root: string,
  subject: string,
  type: string,
  payload: unknown,
  o: EncodeOptions,
): { header: BusHeader; body: string } {
  const entry = entryFor(registry, type, o.version);
  const problem = placeProblem(root, subject, entry);
  if (problem) throw new BusSchemaError(problem.reason, `cannot publish on ${subject}: ${problem.detail}`);
  const parsed = entry.schema.safeParse(payload);
  if (!parsed.success)
    throw new BusSchemaError(
      'bad_payload',
      `${type} ${entry.version}: ${formatIssues(parsed.error, 'payload', { under: 'payload' })}`,
    );
  const header = makeHeader({
    type,
    generation: entry.generation,
    version: entry.version,
    messageId: o.messageId,
    timestamp: o.timestamp,
    inReplyTo: o.inReplyTo,
    deployment: o.deployment,
  });
  return { header, body: JSON.stringify({ header, payload: parsed.data }) };
}

export interface Rejection {
  reason: RejectReason;
  detail: string;
  subject: string;
}

/** Counts of refused messages by reason, and the last few for a status line. */
export class RejectionCounter {
  total = 0;
  readonly byReason: Partial<Record<RejectReason, number>> = {};
  readonly recent: Rejection[] = [];

  constructor(private readonly keep = 20) {}

  add(r: Rejection): void {
    this.total++;
    this.byReason[r.reason] = (this.byReason[r.reason] ?? 0) + 1;
    this.recent.push(r);
    if (this.recent.length > this.keep) this.recent.shift();
  }

  snapshot(): { total: number; byReason: Partial<Record<RejectReason, number>>; recent: Rejection[] } {
    return { total: this.total, byReason: { ...this.byReason }, recent: [...this.recent] };
  }
}
