/**
 * Staged schemas (core/bus/registry.ts, codec.ts, runtime/bus.ts): every message carries the
 * header; a subscriber on the real NATS refuses and counts, naming why, a message whose type or
 * version it does not know, whose payload does not parse, or that is not an envelope at all;
 * staging versions travel only on `<root>.staging.*`; promotion moves a staging version into
 * stable as the next generation, and a stable generation cannot be replaced.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { z } from 'zod';
import { catalogueRegistry } from '../../core/bus/catalogue.js';
import { BusSchemaError, decodeMessage, encodeMessage } from '../../core/bus/codec.js';
import { busHeaderSchema, makeHeader } from '../../core/bus/header.js';
import { SchemaRegistry, SchemaRegistryError } from '../../core/bus/registry.js';
import type { Bus, BusMessage } from '../../runtime/bus.js';
import { cleanupBus, testBus, testRoot, until } from '../helpers/nats.js';

/** A registry with the catalogue plus a staging HeartbeatSignal 1.1-alpha (adds `mood`). */
function withStaging(): SchemaRegistry {
  const r = catalogueRegistry();
  r.stage(
    'HeartbeatSignal',
    '1.1-alpha',
    z.strictObject({ agent_id: z.string(), tick: z.number().int(), mood: z.string() }),
  );
  return r;
}

const header = (o: Partial<{ type: string; generation: number; version: string }> = {}) =>
  makeHeader({
    type: o.type ?? 'HeartbeatSignal',
    generation: o.generation ?? 1,
    version: o.version ?? '1.0',
    messageId: `m-${Math.random().toString(36).slice(2)}`,
    timestamp: new Date(),
  });

describe('the header', () => {
  it('carries schema generation and version, type, id and real timestamp', () => {
    const root = 'r';
    const { header: h, body } = encodeMessage(
      catalogueRegistry(),
      root,
      'r.low.agent.a',
      'HeartbeatSignal',
      { agent_id: 'a', tick: 3, loop: 'main', replayed: false },
      { messageId: 'id-1', timestamp: '2026-01-02T03:04:05.000Z' },
    );
    expect(h).toEqual({
      schema: { generation: 1, version: '1.0' },
      message_type: 'HeartbeatSignal',
      message_id: 'id-1',
      timestamp_real: '2026-01-02T03:04:05.000Z',
    });
    expect(JSON.parse(body)).toEqual({ header: h, payload: { agent_id: 'a', tick: 3, loop: 'main', replayed: false } });
    expect(busHeaderSchema.safeParse({ ...h, message_id: 'has space' }).success).toBe(false);
    expect(busHeaderSchema.safeParse({ ...h, timestamp_real: 'yesterday' }).success).toBe(false);
  });
});

describe('a subscriber refuses and counts what it cannot take (real NATS)', () => {
  const root = testRoot('schemas');
  let bus: Bus & { lines: string[] };
  beforeAll(async () => {
    bus = await testBus(root, { registry: withStaging() });
  });
  afterAll(async () => {
    await cleanupBus(bus);
  });

  it('unknown type, unknown version, bad payload, bad header, not JSON, wrong namespace: each counted with its reason', async () => {
    const subject = bus.subjects.heartbeat('probe');
    const got: BusMessage[] = [];
    const sub = bus.subscribe(bus.subjects.all('low'), (m) => void got.push(m));
    await bus.flush();
    const raw = (payload: unknown, h: unknown = header(), on = subject) =>
      bus.nc.publish(on, JSON.stringify({ header: h, payload }));
    const good = { agent_id: 'probe', tick: 1, loop: 'main', replayed: false };
    raw(good); // accepted
    raw(good, header({ type: 'MysteryPing' }));
    raw(good, header({ generation: 7, version: '7.0' }));
    raw(good, header({ generation: 1, version: '1.9-beta' }));
    raw({ ...good, tick: -1 });
    raw({ ...good, extra: true });
    raw(good, { ...header(), message_id: '' });
    raw(good, header({ generation: 2, version: '1.0' })); // version not of that generation
    bus.nc.publish(subject, 'not json {');
    bus.nc.publish(subject, JSON.stringify({ hello: 'world' }));
    raw({ agent_id: 'probe', tick: 1 }, header({ type: 'AgentReply' })); // a high.* type on low.*
    await until(() => bus.rejections.total === 10, '10 refusals');
    await bus.flush();
    expect(got).toHaveLength(1);
    expect(got[0]!.payload).toEqual(good);
    expect(got[0]!.header.message_type).toBe('HeartbeatSignal');

    const counts = bus.rejections.snapshot();
    expect(counts.byReason).toEqual({
      unknown_type: 1,
      unknown_version: 2,
      bad_payload: 2,
      bad_header: 2,
      bad_json: 1,
      bad_envelope: 1,
      wrong_namespace: 1,
    });
    const why = counts.recent.map((r) => `${r.reason}: ${r.detail}`);
    expect(why).toContain(
      'unknown_type: message type MysteryPing is not known (known: AgentEscalation, AgentLearning, AgentMessage, AgentNote, AgentPause, AgentReply, AgentResume, AgentVerdict, AttentionConfig, BufferDrop, EchoRequest, EchoResponse, HealthStatus, HeartbeatSignal)',
    );
    expect(why).toContain(
      'unknown_version: HeartbeatSignal has no schema generation 7 version 7.0 (known: 1/1.0, 1/1.1-alpha)',
    );
    expect(why).toContainEqual(expect.stringMatching(/^bad_payload: HeartbeatSignal 1\.0: payload\.tick: Too small/));
    expect(why).toContain("bad_payload: HeartbeatSignal 1.0: payload: unknown field 'extra'");
    expect(why).toContainEqual(expect.stringMatching(/^bad_header: header\.message_id:/));
    expect(why).toContainEqual(expect.stringMatching(/^bad_json: body is not JSON/));
    expect(why).toContain('wrong_namespace: AgentReply travels in high, not low');
    // Each refusal is logged once, with the subject and the reason.
    expect(bus.lines.filter((l) => l.startsWith(`bus: refused a message on ${subject}: `))).toHaveLength(10);
    sub.unsubscribe();
  });

  it('a staging version travels only on staging.*; a stable one not there', async () => {
    const stagingHeartbeat = bus.staging.heartbeat('probe');
    const got: BusMessage[] = [];
    const sub = bus.subscribe(`${root}.>`, (m) => void got.push(m));
    await bus.flush();
    const before = bus.rejections.total;
    // The publisher refuses both mistakes itself.
    expect(() =>
      bus.send(
        bus.subjects.heartbeat('probe'),
        'HeartbeatSignal',
        { agent_id: 'probe', tick: 1, mood: 'ok' },
        { version: '1.1-alpha' },
      ),
    ).toThrow(
      /cannot publish on .*\.low\.agent\.probe: HeartbeatSignal 1\.1-alpha is a staging version: it travels only on .*\.staging\.\*/,
    );
    expect(() =>
      bus.publish(stagingHeartbeat, 'HeartbeatSignal', { agent_id: 'probe', tick: 1, loop: 'main', replayed: false }),
    ).toThrow(BusSchemaError);
    expect(() =>
      bus.send(stagingHeartbeat, 'HeartbeatSignal', { agent_id: 'probe', tick: 1 }, { version: '1.1-alpha' }),
    ).toThrow(/payload\.mood: required/);
    bus.send(
      stagingHeartbeat,
      'HeartbeatSignal',
      { agent_id: 'probe', tick: 1, mood: 'curious' },
      { version: '1.1-alpha' },
    );
    // A consumer refuses the same mistakes from a publisher that does not check.
    bus.nc.publish(
      bus.subjects.heartbeat('probe'),
      JSON.stringify({ header: header({ version: '1.1-alpha' }), payload: { agent_id: 'probe', tick: 1, mood: 'x' } }),
    );
    await until(() => got.length === 1 && bus.rejections.total === before + 1, 'the staging message and one refusal');
    expect(got[0]).toMatchObject({
      subject: stagingHeartbeat,
      header: { schema: { generation: 1, version: '1.1-alpha' } },
      payload: { mood: 'curious' },
    });
    expect(bus.rejections.recent.at(-1)).toMatchObject({ reason: 'wrong_stage' });
    sub.unsubscribe();
  });

  it('a subscriber for one type refuses the others, naming what it takes', async () => {
    const got: unknown[] = [];
    const sub = bus.on(bus.subjects.devRequest('echo'), 'EchoRequest', (m) => void got.push(m.payload.ping));
    await bus.flush();
    const before = bus.rejections.total;
    bus.publish(bus.subjects.devRequest('echo'), 'EchoResponse', {
      pong: 'x',
      timestamp: new Date().toISOString(),
      agent: 'echo-v1',
    });
    bus.publish(bus.subjects.devRequest('echo'), 'EchoRequest', { ping: 'hi' });
    await until(() => got.length === 1 && bus.rejections.total === before + 1, 'one taken, one refused');
    expect(bus.rejections.recent.at(-1)).toMatchObject({
      reason: 'unexpected_type',
      detail: 'EchoResponse is not what this subscriber takes (EchoRequest)',
    });
    sub.unsubscribe();
  });
});

describe('stages and promotion', () => {
  const heartbeatV2 = z.strictObject({ agent_id: z.string(), tick: z.number().int(), mood: z.string() });

  it('promotion moves a staging version into stable as the next generation', () => {
    const r = withStaging();
    r.stage('HeartbeatSignal', '1.2-beta', heartbeatV2);
    const entry = r.promote('HeartbeatSignal', '1.2-beta');
    expect(entry).toMatchObject({
      type: 'HeartbeatSignal',
      stage: 'stable',
      generation: 2,
      version: '2.0',
      namespace: 'low',
    });
    expect(r.latestStable('HeartbeatSignal')?.generation).toBe(2);
    expect(r.stagingEntry('HeartbeatSignal', '1.2-beta')).toBeUndefined();
    // Generation 1 is still there, unchanged: old publishers keep working.
    expect(r.lookup('HeartbeatSignal', 1, '1.0')).toMatchObject({ generation: 1, version: '1.0' });

    // A message of the promoted schema now travels on the stable subject as 2.0...
    const { body } = encodeMessage(
      r,
      'r',
      'r.low.agent.a',
      'HeartbeatSignal',
      { agent_id: 'a', tick: 1, mood: 'calm' },
      { messageId: 'p1', timestamp: new Date() },
    );
    expect(JSON.parse(body).header.schema).toEqual({ generation: 2, version: '2.0' });
    expect(decodeMessage(r, 'r', 'r.low.agent.a', body)).toMatchObject({
      ok: true,
      message: { entry: { generation: 2 } },
    });
    // ...and one still sent as the staging version is refused, naming it.
    const staged = JSON.stringify({
      header: makeHeader({
        type: 'HeartbeatSignal',
        generation: 1,
        version: '1.2-beta',
        messageId: 'p2',
        timestamp: new Date(),
      }),
      payload: { agent_id: 'a', tick: 1, mood: 'x' },
    });
    expect(decodeMessage(r, 'r', 'r.staging.low.agent.a', staged)).toEqual({
      ok: false,
      reason: 'unknown_version',
      detail: 'HeartbeatSignal has no schema generation 1 version 1.2-beta (known: 1/1.0, 2/2.0, 1/1.1-alpha)',
    });
    // The other staging version was staged from generation 1: stale now, it must be staged again.
    expect(() => r.promote('HeartbeatSignal', '1.1-alpha')).toThrow(
      /staged from generation 1, but generation 2 is stable now/,
    );
    expect(() => r.stage('HeartbeatSignal', '1.3-alpha', heartbeatV2)).toThrow(
      /must iterate from the latest stable generation \(2\)/,
    );
    expect(r.stage('HeartbeatSignal', '2.1-alpha', heartbeatV2)).toMatchObject({ generation: 2, stage: 'staging' });
  });

  it('the first stable generation of a new type comes from 0.x staging', () => {
    const r = new SchemaRegistry().defineType('GrepRequest', 'dev');
    r.stage('GrepRequest', '0.1-alpha', z.object({ pattern: z.string() }));
    expect(r.promote('GrepRequest', '0.1-alpha')).toMatchObject({ generation: 1, version: '1.0' });
  });

  it('a published stable generation cannot be replaced or skipped, and staging versions are named as such', () => {
    const r = catalogueRegistry();
    expect(() => r.publishStable('HeartbeatSignal', 1, z.object({}))).toThrow(
      /generation 1 is published and immutable; a change is a new generation \(2\), staged first/,
    );
    expect(() => r.publishStable('HeartbeatSignal', 3, z.object({}))).toThrow(/the next stable generation is 2, not 3/);
    expect(() => r.stage('HeartbeatSignal', '1.1', z.object({}))).toThrow(SchemaRegistryError);
    expect(() => r.promote('HeartbeatSignal', '1.5-rc')).toThrow(/has no staging version 1\.5-rc \(staged: none\)/);
    expect(() => r.defineType('HeartbeatSignal', 'high')).toThrow(/already flows in low/);
    // The catalogue's registry is built afresh each time: promoting in one leaves others alone.
    r.stage('HeartbeatSignal', '1.1-rc', z.object({}));
    r.promote('HeartbeatSignal', '1.1-rc');
    expect(catalogueRegistry().latestStable('HeartbeatSignal')?.generation).toBe(1);
  });
});
