/** Peer reachability, the Isolated mode's state machine, and which peers are asked or validate. */
import { describe, expect, it } from 'vitest';
import {
  isReachable,
  isolationStateSchema,
  nextIsolation,
  observePeers,
  peerSeenWithinMs,
  peerToAsk,
  peerValidators,
  type IsolationState,
  type PeerObservation,
  type PeerPresence,
} from '../../core/society/isolation.js';

const now = Date.parse('2025-01-01T12:00:00Z');
const running = (id: string, trust = 0.5, seenAgoMs = 1000, extra: Partial<PeerPresence> = {}): PeerPresence => ({
  peerAgentId: id,
  trust,
  link: 'active',
  linkSeenAt: null,
  local: { status: 'running', mode: 'normal', seenAt: now - seenAgoMs },
  ...extra,
});

describe('reachability', () => {
  it('a local peer is reachable while its loop runs, thinks and was seen recently', () => {
    expect(isReachable(running('a'), now)).toBe(true);
    expect(isReachable(running('a', 0.5, peerSeenWithinMs + 1), now)).toBe(false); // silent too long
    expect(isReachable({ ...running('a'), local: { status: 'stopped', mode: 'normal', seenAt: now } }, now)).toBe(
      false,
    );
    expect(isReachable({ ...running('a'), local: { status: 'failed', mode: 'normal', seenAt: now } }, now)).toBe(false);
    // In Core Outage the peer cannot think, so it cannot answer.
    expect(isReachable({ ...running('a'), local: { status: 'running', mode: 'core_outage', seenAt: now } }, now)).toBe(
      false,
    );
    // Isolated itself, it still answers.
    expect(isReachable({ ...running('a'), local: { status: 'running', mode: 'isolated', seenAt: now } }, now)).toBe(
      true,
    );
    expect(isReachable({ ...running('a'), local: { status: 'running', mode: 'normal', seenAt: null } }, now)).toBe(
      false,
    );
  });

  it('a peer elsewhere is reachable when heard from over its link recently; a blocked link never is', () => {
    expect(isReachable({ ...running('r'), local: null, linkSeenAt: now - 5000 }, now)).toBe(true);
    expect(isReachable({ ...running('r'), local: null, linkSeenAt: null }, now)).toBe(false);
    expect(isReachable({ ...running('r'), local: null, linkSeenAt: now - peerSeenWithinMs - 1 }, now)).toBe(false);
    expect(isReachable({ ...running('b'), link: 'blocked' }, now)).toBe(false);
    expect(isReachable(running('a', 0.5, 90_000), now, 60_000)).toBe(false);
  });

  it('observes known peers (not blocked) and the reachable ones, most trusted first, a few ids listed', () => {
    const peers = [
      running('low', 0.2),
      running('high', 0.9),
      { ...running('gone'), local: { status: 'stopped', mode: 'normal', seenAt: now } },
      { ...running('blocked', 1), link: 'blocked' },
      ...['p1', 'p2', 'p3', 'p4', 'p5'].map((id) => running(id, 0.5)),
    ];
    const obs = observePeers(peers, now, 3);
    expect(obs).toEqual({ known: 8, reachable: 7, reachableIds: ['high', 'p1', 'p2', 'p3', 'p4'], isolationTicks: 3 });
    expect(observePeers([], now, 3)).toEqual({ known: 0, reachable: 0, reachableIds: [], isolationTicks: 3 });
  });
});

describe('the Isolated mode', () => {
  const fresh = (): IsolationState => isolationStateSchema.parse(undefined);
  const none = (n = 3): PeerObservation => ({ known: 2, reachable: 0, reachableIds: [], isolationTicks: n });
  const back: PeerObservation = { known: 2, reachable: 1, reachableIds: ['b'], isolationTicks: 3 };

  it('enters after isolationTicks ticks in a row with none of its peers reachable, and stays', () => {
    let s = fresh();
    const changes: Array<string | null> = [];
    for (let tick = 1; tick <= 5; tick++) {
      const r = nextIsolation(s, none(), `t${tick}`, tick);
      s = r.state;
      changes.push(r.change);
    }
    expect(changes).toEqual([null, null, 'enter', null, null]);
    expect(s).toMatchObject({ unreachableTicks: 5, since: 't3', sinceTick: 3, known: 2, reachable: [] });
  });

  it('a reachable peer in between resets the count; one reachable peer ends isolation at once', () => {
    let s = fresh();
    s = nextIsolation(s, none(), 'a', 1).state;
    s = nextIsolation(s, none(), 'b', 2).state;
    s = nextIsolation(s, back, 'c', 3).state; // reached one: the streak starts over
    expect(s.unreachableTicks).toBe(0);
    s = nextIsolation(s, none(), 'd', 4).state;
    s = nextIsolation(s, none(), 'e', 5).state;
    expect(s.since).toBeNull();
    const entered = nextIsolation(s, none(), 'f', 6);
    expect(entered.change).toBe('enter');
    const left = nextIsolation(entered.state, back, 'g', 7);
    expect(left.change).toBe('leave');
    expect(left.state).toEqual({ unreachableTicks: 0, since: null, sinceTick: null, known: 2, reachable: ['b'] });
  });

  it('an agent without known peers never becomes isolated, and one whose peers are all gone from its list leaves the mode', () => {
    let s = fresh();
    for (let tick = 1; tick <= 10; tick++) {
      const r = nextIsolation(s, { known: 0, reachable: 0, reachableIds: [], isolationTicks: 1 }, 'x', tick);
      expect(r.change).toBeNull();
      s = r.state;
    }
    const isolated = nextIsolation(s, none(1), 'y', 11);
    expect(isolated.change).toBe('enter'); // isolation_ticks 1: the first unreachable tick
    expect(
      nextIsolation(isolated.state, { known: 0, reachable: 0, reachableIds: [], isolationTicks: 1 }, 'z', 12).change,
    ).toBe('leave');
  });

  it('carry-overs from before the mode existed parse to the not-isolated state', () => {
    expect(isolationStateSchema.parse(undefined)).toEqual({
      unreachableTicks: 0,
      since: null,
      sinceTick: null,
      known: 0,
      reachable: [],
    });
    expect(isolationStateSchema.parse({ since: '2025-01-01T00:00:00Z' })).toMatchObject({
      since: '2025-01-01T00:00:00Z',
      unreachableTicks: 0,
    });
  });
});

describe('which peers the reflexes turn to', () => {
  const peers = [
    running('trusted', 0.9),
    running('also', 0.9),
    running('doubted', 0.3),
    { ...running('elsewhere', 1), local: null, linkSeenAt: now },
    { ...running('stale', 1), local: { status: 'running', mode: 'normal', seenAt: now - peerSeenWithinMs - 1 } },
    { ...running('lost', 1), link: 'lost' },
  ];

  it('asks the most trusted peer it can reach and deliver to (an active link, a peer of this deployment)', () => {
    expect(peerToAsk(peers, now)?.peerAgentId).toBe('also'); // equal trust: by id
    expect(
      peerToAsk(
        peers.filter((p) => p.trust < 0.5),
        now,
      )?.peerAgentId,
    ).toBe('doubted');
    expect(peerToAsk([peers[3]!, peers[4]!, peers[5]!], now)).toBeNull();
  });

  it('picks the N most trusted reachable peers at or above the exclusion trust as validators', () => {
    expect(peerValidators(peers, 5, 0.4, now).map((p) => p.peerAgentId)).toEqual(['also', 'trusted']);
    expect(peerValidators(peers, 1, 0.4, now).map((p) => p.peerAgentId)).toEqual(['also']);
    expect(peerValidators(peers, 5, 0.2, now).map((p) => p.peerAgentId)).toEqual(['also', 'trusted', 'doubted']);
    expect(peerValidators(peers, 0, 0, now)).toEqual([]);
  });
});
