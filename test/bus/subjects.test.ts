/**
 * The bus's subjects (core/bus/subjects.ts): the namespaces under a configurable root and their
 * staging mirrors; a value in a subject (an agent id with a dot or a wildcard) escaped into one
 * token, reversibly (a property over any string), so that on the real NATS it reaches exactly
 * its own subject and cannot widen a subscription or land on another agent's subject.
 */
import fc from 'fast-check';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { agentIdPattern } from '../../core/ids.js';
import {
  assertToken,
  busRootSchema,
  busSubjects,
  commandStreamName,
  deploymentIdOf,
  deploymentIdSchema,
  deploymentRoot,
  escapeToken,
  isLiteralToken,
  parseAgentCommandSubject,
  placeOf,
  SubjectTokenError,
  unescapeToken,
} from '../../core/bus/subjects.js';
import type { Bus } from '../../runtime/bus.js';
import { cleanupBus, testBus, testRoot, until } from '../helpers/nats.js';

describe('namespaces under a root', () => {
  it('builds every namespace under the default root and its staging mirror', () => {
    const s = busSubjects();
    expect(s.heartbeat('scribe')).toBe('mindloop.low.agent.scribe');
    expect(s.agentEvent('scribe', 'reply')).toBe('mindloop.high.agent.scribe.reply');
    expect(s.agentEvents()).toBe('mindloop.high.agent.*.*');
    expect(s.agentCommand('scribe', 'pause')).toBe('mindloop.command.agent.scribe.pause');
    expect(s.agentCommandsAll()).toBe('mindloop.command.agent.>');
    expect(s.health('worker')).toBe('mindloop.meta.health.worker');
    expect(s.attention('config')).toBe('mindloop.meta.attention.config');
    expect(s.devRequest('echo')).toBe('mindloop.dev.request.echo');
    expect(s.devResponse('echo')).toBe('mindloop.dev.response.echo');
    expect(s.all('command')).toBe('mindloop.command.>');
    const staging = busSubjects('mindloop', 'staging');
    expect(staging.heartbeat('scribe')).toBe('mindloop.staging.low.agent.scribe');
    expect(staging.devRequest('echo')).toBe('mindloop.staging.dev.request.echo');
  });

  it('takes another root, of one or more literal tokens, and refuses a bad one', () => {
    expect(busSubjects('acme.mindloop').heartbeat('a')).toBe('acme.mindloop.low.agent.a');
    for (const bad of ['', 'a..b', 'mind loop', 'a.*', 'a.>', '.a', 'staging', 'a/b']) {
      expect(busRootSchema.safeParse(bad).success, bad).toBe(false);
      expect(() => busSubjects(bad), bad).toThrow(SubjectTokenError);
    }
  });

  it('places a subject (stage, namespace, rest) and parses agent command subjects', () => {
    expect(placeOf('mindloop', 'mindloop.staging.high.agent.a.reply')).toEqual({
      stage: 'staging',
      namespace: 'high',
      rest: ['agent', 'a', 'reply'],
    });
    expect(placeOf('mindloop', 'mindloop.nope.x')).toBeNull();
    expect(placeOf('mindloop', 'other.low.agent.a')).toBeNull();
    const s = busSubjects('r');
    expect(parseAgentCommandSubject('r', s.agentCommand('a.b*', 'note'))).toEqual({ agentId: 'a.b*', command: 'note' });
    expect(parseAgentCommandSubject('r', 'r.command.agent.a.explode')).toBeNull();
    expect(parseAgentCommandSubject('r', 'r.staging.command.agent.a.note')).toBeNull();
    expect(commandStreamName('acme.mindloop')).toBe('ACME_MINDLOOP_COMMANDS');
  });
});

describe('subject tokens', () => {
  it('escapes dots, wildcards, whitespace and non-ASCII into one token, and refuses what cannot be one', () => {
    expect(escapeToken('agent.1')).toBe('agent~2E1');
    expect(escapeToken('*')).toBe('~2A');
    expect(escapeToken('>')).toBe('~3E');
    expect(escapeToken('a b')).toBe('a~20b');
    expect(escapeToken('~')).toBe('~7E');
    expect(escapeToken('ä')).toBe('~C3~A4');
    expect(escapeToken('plain_id-1')).toBe('plain_id-1');
    expect(() => escapeToken('')).toThrow(SubjectTokenError);
    expect(() => escapeToken('x'.repeat(300))).toThrow(/too long/);
    expect(() => unescapeToken('a.b')).toThrow(SubjectTokenError);
    expect(() => unescapeToken('~zz')).toThrow(SubjectTokenError);
  });

  it('a literal token (event, command, root part) with a dot or wildcard is refused, not escaped', () => {
    expect(isLiteralToken('reply')).toBe(true);
    for (const bad of ['a.b', '*', '>', '', ' ', 'a b', '$JS']) expect(isLiteralToken(bad), bad).toBe(false);
    expect(() => assertToken('re.ply', 'event')).toThrow(/event "re\.ply" is not a subject token/);
    expect(() => busSubjects().agentEvent('a', 'reply.>' as 'reply')).toThrow(SubjectTokenError);
  });

  it('any string escapes to exactly one safe token that unescapes to itself', () => {
    fc.assert(
      fc.property(fc.string({ unit: 'grapheme', minLength: 1, maxLength: 40 }), (value) => {
        const token = escapeToken(value);
        expect(token).toMatch(/^[A-Za-z0-9_~-]+$/);
        expect(unescapeToken(token)).toBe(value);
      }),
    );
  });

  it('every valid agent id (ids may hold dots) gets a subject of exactly one more token', () => {
    const s = busSubjects('r');
    fc.assert(
      fc.property(fc.stringMatching(agentIdPattern), (id) => {
        expect(s.heartbeat(id).split('.')).toHaveLength(4);
        expect(s.agentCommand(id, 'note').split('.')).toHaveLength(5);
      }),
    );
  });
});

describe('deployments', () => {
  it("a deployment's id comes from its Temporal namespace: the name as a token and 12 hex digits of its id", () => {
    expect(deploymentIdOf('default', '3F2A9C1B-77D0-4E2B-9A41-0C5D6E7F8091')).toBe('default-3f2a9c1b77d0');
    expect(deploymentIdOf('acme.prod/eu', '3f2a9c1b-77d0-4e2b-9a41-0c5d6e7f8091')).toBe('acme_prod_eu-3f2a9c1b77d0');
    expect(() => deploymentIdOf('default', 'abc')).toThrow(SubjectTokenError);
    fc.assert(
      fc.property(fc.string({ minLength: 1, maxLength: 300 }), fc.uuid(), (ns, id) => {
        expect(deploymentIdSchema.safeParse(deploymentIdOf(ns, id)).success).toBe(true);
      }),
    );
  });

  it("a deployment's subjects live under <root>.<deployment>; a deployment named like a namespace is refused", () => {
    expect(busSubjects(deploymentRoot('mindloop', 'prod')).heartbeat('demo')).toBe('mindloop.prod.low.agent.demo');
    expect(commandStreamName(deploymentRoot('mindloop', 'default-3f2a9c1b77d0'))).toBe(
      'MINDLOOP_DEFAULT-3F2A9C1B77D0_COMMANDS',
    );
    for (const bad of ['low', 'command', 'staging', 'a.b', '*', ''])
      expect(deploymentIdSchema.safeParse(bad).success).toBe(false);
    expect(() => deploymentRoot('mindloop', 'a.b')).toThrow(SubjectTokenError);
  });
});

describe('escaping on the real NATS', () => {
  const root = testRoot('subjects');
  let bus: Bus;
  beforeAll(async () => {
    bus = await testBus(root);
  });
  afterAll(async () => {
    await cleanupBus(bus);
  });

  it('an agent id with dots and wildcards reaches only its own subject', async () => {
    const s = bus.subjects;
    const seen: Record<string, string[]> = { all: [], plainA: [], wildcardOne: [] };
    const subs = [
      bus.on(s.heartbeats(), 'HeartbeatSignal', (m) => void seen.all!.push(m.payload.agent_id)),
      // What a dotted id would hit if it were not escaped: `low.agent.a` and `low.agent.a.>`.
      bus.on(s.heartbeat('a'), 'HeartbeatSignal', (m) => void seen.plainA!.push(m.payload.agent_id)),
      bus.nc.subscribe(`${s.namespace('low')}.agent.a.>`, {
        callback: (_e, m) => void seen.wildcardOne!.push(m.subject),
      }),
    ];
    await bus.flush();
    for (const id of ['a.b', 'a.>', 'a.*', '*', 'a']) {
      bus.publish(s.heartbeat(id), 'HeartbeatSignal', { agent_id: id, tick: 1, loop: 'main', replayed: false });
    }
    await until(() => seen.all!.length === 5, 'five heartbeats on low.agent.*');
    await bus.flush();
    expect(seen.all!.sort()).toEqual(['*', 'a', 'a.*', 'a.>', 'a.b']);
    expect(seen.plainA).toEqual(['a']);
    expect(seen.wildcardOne).toEqual([]);
    for (const sub of subs) sub.unsubscribe();
  });
});
