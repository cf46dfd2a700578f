/**
 * The bus's subjects: every one lives under a deployment's root, `<bus root>.<deployment>` (the
 * bus root is `mindloop` by default, MINDLOOP_BUS_ROOT; the deployment is one Temporal
 * namespace's Mindloop, `deploymentIdOf`), so deployments sharing a NATS never hear each other.
 * Under it, one of five namespaces, and each namespace has a `staging.` mirror for schemas still being
 * tried out:
 *
 *   <root>.low.agent.<id>                      an agent's tick heartbeat
 *   <root>.high.agent.<id>.<event>             reply | escalation | verdict | learning | message
 *   <root>.command.agent.<id>.<command>        note | pause | resume (durable, see docs/bus.md)
 *   <root>.meta.health.<component>, <root>.meta.attention.<topic>
 *   <root>.dev.request.<agent>, <root>.dev.response.<agent>
 *   <root>.staging.<namespace>.…               the same shapes, for staging schema versions
 *
 * A value placed in a subject (an agent id) is escaped into exactly one token, so a dot or a
 * wildcard in it can never widen or redirect the subject. Pure; no Node APIs.
 */
import { z } from 'zod';

export const busNamespaces = ['low', 'high', 'command', 'meta', 'dev'] as const;
export type BusNamespace = (typeof busNamespaces)[number];
export type BusStage = 'stable' | 'staging';

export const agentEvents = ['reply', 'escalation', 'verdict', 'learning', 'message'] as const;
export type AgentEvent = (typeof agentEvents)[number];
export const agentCommands = ['note', 'pause', 'resume'] as const;
export type AgentCommand = (typeof agentCommands)[number];

export const defaultBusRoot = 'mindloop';

/** A literal token: what the code itself puts in a subject (namespaces, event names, the root's parts). */
const tokenPattern = /^[A-Za-z0-9_-]{1,64}$/;
// Why a closed set: NATS itself only forbids `.`, `*`, `>` and whitespace, but `$`-prefixed
// subjects are the server's own ($JS, $SYS) and other punctuation trips up tooling.
const plainChar = /[A-Za-z0-9_-]/;
const utf8 = new TextEncoder();
/** Longest escaped token accepted: an agent id is at most 64 characters, so 3×64 fits with room. */
export const maxEscapedTokenLength = 256;

/** The root: one or more literal tokens joined by dots, e.g. `mindloop` or `acme.mindloop`. */
export const busRootSchema = z
  .string()
  .max(128)
  .refine(
    (r) => r.split('.').every((t) => tokenPattern.test(t)),
    'tokens of letters, digits, "-" and "_", separated by dots',
  )
  .refine((r) => r.split('.')[0] !== 'staging', 'may not start with "staging"');

export class SubjectTokenError extends Error {
  override readonly name = 'SubjectTokenError';
}

/** Whether `token` is a literal subject token (no dot, no wildcard, no whitespace, not empty). */
export function isLiteralToken(token: string): boolean {
  return tokenPattern.test(token);
}

/** `token` itself when it is a literal token; otherwise a SubjectTokenError naming `what`. */
export function assertToken(token: string, what: string): string {
  if (!isLiteralToken(token))
    throw new SubjectTokenError(
      `${what} ${JSON.stringify(token)} is not a subject token (letters, digits, "-" and "_", 1 to 64 characters)`,
    );
  return token;
}

/**
 * A value as one subject token: letters, digits, `-` and `_` stay, every other byte of its
 * UTF-8 becomes `~XX` (hex). `a.b` → `a~2Eb`, `*` → `~2A`. Reversible (`unescapeToken`) and
 * never empty, never a wildcard, never more than one token.
 */
export function escapeToken(value: string): string {
  if (value.length === 0) throw new SubjectTokenError('an empty value cannot be a subject token');
  let out = '';
  for (const ch of value) {
    if (plainChar.test(ch)) out += ch;
    else for (const b of utf8.encode(ch)) out += `~${b.toString(16).toUpperCase().padStart(2, '0')}`;
  }
  if (out.length > maxEscapedTokenLength)
    throw new SubjectTokenError(
      `value too long for a subject token (${out.length} > ${maxEscapedTokenLength} escaped characters)`,
    );
  return out;
}

/** The value `escapeToken` made `token` from; a SubjectTokenError when `token` is not such an escape. */
export function unescapeToken(token: string): string {
  if (!/^(?:[A-Za-z0-9_-]|~[0-9A-F]{2})+$/.test(token))
    throw new SubjectTokenError(`${JSON.stringify(token)} is not an escaped subject token`);
  const bytes: number[] = [];
  for (let i = 0; i < token.length; i++) {
    if (token[i] === '~') {
      bytes.push(parseInt(token.slice(i + 1, i + 3), 16));
      i += 2;
    } else bytes.push(token.charCodeAt(i));
  }
  return new TextDecoder('utf-8', { fatal: true }).decode(new Uint8Array(bytes));
}

/** Subject builders under one root, for the stable namespaces or their staging mirrors. */
export interface BusSubjects {
  readonly root: string;
  readonly stage: BusStage;
  /** `<prefix>.<namespace>`: the head of every subject of that namespace. */
  namespace(ns: BusNamespace): string;
  /** `<prefix>.<namespace>.>`: all of a namespace. */
  all(ns: BusNamespace): string;
  heartbeat(agentId: string): string;
  /** Every agent's heartbeat: `<prefix>.low.agent.*`. */
  heartbeats(): string;
  agentEvent(agentId: string, event: AgentEvent): string;
  /** One agent's events, or every agent's (`agentId` omitted). */
  agentEvents(agentId?: string): string;
  agentCommand(agentId: string, command: AgentCommand): string;
  /** Every agent's commands: `<prefix>.command.agent.>`. */
  agentCommandsAll(): string;
  /** `<prefix>.meta.health.<component>`: a HealthStatus (`buffer_drop` is taken by `bufferDrop`). */
  health(component: string): string;
  /** `<prefix>.meta.health.buffer_drop`: a BufferDrop. */
  bufferDrop(): string;
  attention(topic: string): string;
  devRequest(agent: string): string;
  devResponse(agent: string): string;
}

/** Subject builders for `root` (validated), stable or the staging mirror. */
export function busSubjects(root: string = defaultBusRoot, stage: BusStage = 'stable'): BusSubjects {
  const r = busRootSchema.safeParse(root);
  if (!r.success)
    throw new SubjectTokenError(`bus root ${JSON.stringify(root)}: ${r.error.issues[0]?.message ?? 'invalid'}`);
  const prefix = stage === 'staging' ? `${root}.staging` : root;
  const ns = (n: BusNamespace) => `${prefix}.${n}`;
  const literal = (value: string, what: string) => assertToken(value, what);
  return {
    root,
    stage,
    namespace: ns,
    all: (n) => `${ns(n)}.>`,
    heartbeat: (agentId) => `${ns('low')}.agent.${escapeToken(agentId)}`,
    heartbeats: () => `${ns('low')}.agent.*`,
    agentEvent: (agentId, event) => `${ns('high')}.agent.${escapeToken(agentId)}.${literal(event, 'event')}`,
    agentEvents: (agentId) => `${ns('high')}.agent.${agentId === undefined ? '*' : escapeToken(agentId)}.*`,
    agentCommand: (agentId, command) => `${ns('command')}.agent.${escapeToken(agentId)}.${literal(command, 'command')}`,
    agentCommandsAll: () => `${ns('command')}.agent.>`,
    health: (component) => `${ns('meta')}.health.${escapeToken(component)}`,
    bufferDrop: () => `${ns('meta')}.health.buffer_drop`,
    attention: (topic) => `${ns('meta')}.attention.${escapeToken(topic)}`,
    devRequest: (agent) => `${ns('dev')}.request.${escapeToken(agent)}`,
    devResponse: (agent) => `${ns('dev')}.response.${escapeToken(agent)}`,
  };
}

/** Where a concrete subject sits: its stage, namespace and the tokens after the namespace. */
export interface SubjectPlace {
  stage: BusStage;
  namespace: BusNamespace;
  rest: string[];
}

/** A deployment id: one literal subject token. */
export const deploymentIdSchema = z
  .string()
  .regex(tokenPattern, 'letters, digits, "-" and "_", 1 to 64 characters')
  // Why: `<root>.<namespace>` subjects of a root without deployments must never be a deployment's.
  .refine(
    (t) => t !== 'staging' && !(busNamespaces as readonly string[]).includes(t),
    'may not be a bus namespace (low, high, command, meta, dev) or "staging"',
  );

/**
 * The id of the deployment that serves Temporal namespace `namespace`, whose id (a UUID the
 * cluster drew when it created the namespace) is `namespaceId`: the name, as a token, and 12 hex
 * digits of the id. Two clusters' `default` namespaces differ; one namespace keeps its id across
 * restarts of its cluster, so commands waiting on the bus for it are still its own.
 */
export function deploymentIdOf(namespace: string, namespaceId: string): string {
  const hex = namespaceId.toLowerCase().replace(/[^0-9a-f]/g, '');
  if (hex.length < 12)
    throw new SubjectTokenError(`namespace id ${JSON.stringify(namespaceId)} has fewer than 12 hex digits`);
  const name = namespace.replace(/[^A-Za-z0-9_-]/g, '_').slice(0, 40) || 'ns';
  return `${name}-${hex.slice(0, 12)}`;
}

/** The root a deployment's subjects live under: `<root>.<deployment>`. */
export function deploymentRoot(root: string, deployment: string): string {
  return `${root}.${assertToken(deployment, 'deployment')}`;
}

/** The place of `subject` under `root`, or null when it is not a bus subject of that root. */
export function placeOf(root: string, subject: string): SubjectPlace | null {
  if (!subject.startsWith(`${root}.`)) return null;
  let tokens = subject.slice(root.length + 1).split('.');
  let stage: BusStage = 'stable';
  if (tokens[0] === 'staging') {
    stage = 'staging';
    tokens = tokens.slice(1);
  }
  const namespace = busNamespaces.find((n) => n === tokens[0]);
  if (!namespace) return null;
  return { stage, namespace, rest: tokens.slice(1) };
}

/** The agent and command of `<root>.command.agent.<id>.<command>`, or null for any other subject. */
export function parseAgentCommandSubject(
  root: string,
  subject: string,
): { agentId: string; command: AgentCommand } | null {
  const place = placeOf(root, subject);
  if (
    !place ||
    place.stage !== 'stable' ||
    place.namespace !== 'command' ||
    place.rest.length !== 3 ||
    place.rest[0] !== 'agent'
  )
    return null;
  const command = agentCommands.find((c) => c === place.rest[2]);
  if (!command) return null;
  try {
    return { agentId: unescapeToken(place.rest[1]!), command };
  } catch {
    return null;
  }
}

/** The JetStream stream that keeps `<root>.command.>`: stream names take no dots. */
export function commandStreamName(root: string): string {
  return `${root.replace(/\./g, '_').toUpperCase()}_COMMANDS`;
}
