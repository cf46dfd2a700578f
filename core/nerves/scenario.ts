/**
 * A simulated sensor stream for the collision nerve: episodes of quiet, sensor noise, an
 * obstacle approaching head-on (evaded, it passes behind), a near miss (it turns away) and one
 * passing by to the side. Seeded (mulberry32): the same seed gives the same stream, so a
 * workflow can regenerate it after continue-as-new and a replay sees the same readings.
 * Readings are rounded (0.1 m, 0.1 m/s, 1°, 0.1 s) so prompts stay short and stable.
 */
import type { Observation } from './nerve.js';

/** A 32-bit seeded PRNG: uniform in [0, 1). */
export function mulberry32(seed: number): () => number {
  let a = seed >>> 0;
  return () => {
    a = (a + 0x6d2b79f5) >>> 0;
    let t = a;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

export const scenarioKinds = ['mixed', 'repetitive'] as const;
type ScenarioKind = (typeof scenarioKinds)[number];

/** Seconds between readings. */
const scenarioStepS = 0.5;
/** The sensors' range: nothing sensed reads as this far. */
const maxRangeM = 100;

type Rng = () => number;
type Reading = Omit<Observation, 't'>;

const round1 = (x: number) => Math.round(x * 10) / 10;
const between = (rng: Rng, lo: number, hi: number) => lo + (hi - lo) * rng();
const intBetween = (rng: Rng, lo: number, hi: number) => Math.floor(between(rng, lo, hi + 1));
const reading = (distanceM: number, closingSpeedMps: number, bearingDeg: number, obstacle = true): Reading => ({
  distanceM: round1(Math.min(maxRangeM, Math.max(0, distanceM))),
  closingSpeedMps: round1(closingSpeedMps),
  bearingDeg: Math.max(-180, Math.min(180, Math.round(bearingDeg))),
  obstacle,
});
const nothing = (): Reading => reading(maxRangeM, 0, 0, false);

function quiet(rng: Rng): Reading[] {
  return Array.from({ length: intBetween(rng, 3, 8) }, nothing);
}

/** Spurious returns: far away, or behind, drifting. */
function noise(rng: Rng): Reading[] {
  return Array.from({ length: intBetween(rng, 1, 3) }, () =>
    rng() < 0.5
      ? reading(between(rng, 55, 95), between(rng, -2, 2), between(rng, -40, 40))
      : reading(between(rng, 10, 60), between(rng, -2, 2), between(rng, 100, 180) * (rng() < 0.5 ? -1 : 1)),
  );
}

/** Head-on: closes in fast; evaded at close range, it passes behind and recedes. */
function approach(rng: Rng): Reading[] {
  const out: Reading[] = [];
  const speed = between(rng, 4, 8);
  const side = rng() < 0.5 ? -1 : 1;
  let d = between(rng, 45, 60);
  let bearing = between(rng, 0, 15) * side;
  while (d > 5) {
    out.push(reading(d, speed + between(rng, -0.3, 0.3), bearing));
    d -= speed * scenarioStepS;
  }
  for (let i = 0; i < 4; i++) {
    bearing += 35 * side;
    out.push(reading(d, -speed, bearing));
    d += speed * scenarioStepS;
  }
  return out;
}

/** Closes in slowly, then turns away at 10–16 m and leaves. */
function nearMiss(rng: Rng): Reading[] {
  const out: Reading[] = [];
  const speed = between(rng, 3.5, 6);
  const bearing = between(rng, -20, 20);
  let d = between(rng, 40, 55);
  const turnAt = between(rng, 10, 16);
  while (d > turnAt) {
    out.push(reading(d, speed, bearing));
    d -= speed * scenarioStepS;
  }
  const away = between(rng, 2, 4);
  while (d <= 40) {
    out.push(reading(d, -away, bearing));
    d += away * scenarioStepS;
  }
  return out;
}

/** To the side: slowly closer, then abeam and behind. */
function passBy(rng: Rng): Reading[] {
  const out: Reading[] = [];
  const side = rng() < 0.5 ? -1 : 1;
  let d = between(rng, 25, 40);
  let bearing = between(rng, 50, 70);
  const speed = between(rng, 0.8, 2.5);
  while (bearing < 95) {
    out.push(reading(d, bearing < 85 ? speed : -speed, bearing * side));
    d -= (bearing < 85 ? speed : -speed) * scenarioStepS;
    bearing += between(rng, 4, 9);
  }
  out.push(reading(d, -speed, 120 * side));
  return out;
}

const episodes = [quiet, noise, approach, nearMiss, passBy];

/** The next episode of a mixed stream: quiet and approaches most often. */
function nextEpisode(rng: Rng): Reading[] {
  const r = rng();
  const pick = r < 0.3 ? 0 : r < 0.45 ? 1 : r < 0.7 ? 2 : r < 0.85 ? 3 : 4;
  return episodes[pick]!(rng);
}

/**
 * The endless stream of a seed. `mixed`: episodes drawn at random; `repetitive`: one
 * approach and a quiet spell, drawn once from the seed and repeated exactly.
 */
export function* observations(seed: number, kind: ScenarioKind = 'mixed'): Generator<Observation, never, undefined> {
  const rng = mulberry32(seed);
  const loop = kind === 'repetitive' ? [...approach(rng), ...quiet(rng)] : null;
  let i = 0;
  for (;;) {
    for (const r of loop ?? nextEpisode(rng)) {
      yield { t: round1(i * scenarioStepS), ...r };
      i++;
    }
  }
}

/** Readings `from` (inclusive) to `to` (exclusive) of a seed's stream. */
export function scenarioSlice(seed: number, from: number, to: number, kind: ScenarioKind = 'mixed'): Observation[] {
  const out: Observation[] = [];
  let i = 0;
  for (const o of observations(seed, kind)) {
    if (i >= to) break;
    if (i >= from) out.push(o);
    i++;
  }
  return out;
}

/** The first `n` readings of a seed's stream. */
export function scenario(seed: number, n: number, kind: ScenarioKind = 'mixed'): Observation[] {
  return scenarioSlice(seed, 0, n, kind);
}
