/**
 * Collision avoidance: IDLE → DETECT → EVALUATE → EVADE → RESUME → IDLE, on the sensors'
 * readings of the nearest obstacle. The ground truth sorts a reading into a threat level by
 * its bucket (range band × closing band) and picks the action for the state from that level.
 */
import { stateMachineSchema } from '../state-machines.js';
import type { NerveDef, Observation } from './nerve.js';

export const collisionMachine = stateMachineSchema.parse({
  name: 'collision_avoidance',
  description: 'Avoid collisions with obstacles the sensors report (distance, closing speed, bearing).',
  initial: 'IDLE',
  states: {
    IDLE: {
      description: 'cruising; nothing to watch',
      actions: {
        detect: { to: 'DETECT', description: 'an obstacle ahead is in range: look at it' },
        stay: { description: 'nothing in range: keep cruising' },
      },
    },
    DETECT: {
      description: 'an obstacle was sensed',
      actions: {
        evaluate: { to: 'EVALUATE', description: 'it is ahead, in range and coming closer: assess the risk' },
        dismiss: { to: 'IDLE', description: 'a false alarm, out of range, behind or moving away' },
      },
    },
    EVALUATE: {
      description: 'assessing the risk of a collision',
      actions: {
        evade: { to: 'EVADE', description: 'a collision is imminent: take evasive action' },
        stay: { description: 'coming closer but not yet dangerous: keep watching' },
        dismiss: { to: 'IDLE', description: 'no longer a threat' },
      },
    },
    EVADE: {
      description: 'evading',
      actions: {
        stay: { description: 'still dangerously close and closing: keep evading' },
        clear: { to: 'RESUME', description: 'the danger has passed' },
      },
    },
    RESUME: {
      description: 'returning to the original course',
      actions: {
        resume: { to: 'IDLE', description: 'the way is clear: back to cruising' },
        stay: { description: 'something is still near: hold before resuming' },
        evade: { to: 'EVADE', description: 'danger again: evade' },
      },
    },
  },
});

/** Range bands (m): far beyond 50, mid to 20, near to 8, close within 8. */
const rangeOf = (d: number) => (d > 50 ? 'far' : d > 20 ? 'mid' : d > 8 ? 'near' : 'close');
/** Closing bands (m/s): away (not closing), slow up to 3, fast beyond. */
const closingOf = (v: number) => (v <= 0 ? 'away' : v <= 3 ? 'slow' : 'fast');

const ranges = ['far', 'mid', 'near', 'close'] as const;
const closings = ['away', 'slow', 'fast'] as const;
export const collisionBuckets: readonly string[] = [
  'none',
  'behind',
  ...ranges.flatMap((r) => closings.map((c) => `${r}_${c}`)),
];

/** `none` (nothing sensed), `behind` (|bearing| > 90°), else `<range>_<closing>`. */
export function collisionBucket(o: Observation): string {
  if (!o.obstacle) return 'none';
  if (Math.abs(o.bearingDeg) > 90) return 'behind';
  return `${rangeOf(o.distanceM)}_${closingOf(o.closingSpeedMps)}`;
}

type Threat = 'clear' | 'watch' | 'danger';

const dangerous = new Set(['near_fast', 'close_slow', 'close_fast']);
const watched = new Set(['mid_slow', 'mid_fast', 'near_slow']);

/** The threat a bucket stands for: nothing, something to watch, or a collision course. */
export function threatOf(bucket: string): Threat {
  return dangerous.has(bucket) ? 'danger' : watched.has(bucket) ? 'watch' : 'clear';
}

const policyTable: Record<string, Record<Threat, string>> = {
  IDLE: { clear: 'stay', watch: 'detect', danger: 'detect' },
  DETECT: { clear: 'dismiss', watch: 'evaluate', danger: 'evaluate' },
  EVALUATE: { clear: 'dismiss', watch: 'stay', danger: 'evade' },
  EVADE: { clear: 'clear', watch: 'clear', danger: 'stay' },
  RESUME: { clear: 'resume', watch: 'stay', danger: 'evade' },
};

/** The right action in `state` for a reading in `bucket`; an unknown state answers as IDLE. */
export function collisionPolicy(state: string, bucket: string): string {
  return (policyTable[state] ?? policyTable.IDLE!)[threatOf(bucket)];
}

const fixed = (x: number) => (Math.round(x * 10) / 10).toFixed(1);

export const collisionNerve: NerveDef = {
  name: 'collision',
  machine: collisionMachine,
  organs: ['sensors'],
  // A sensor read and a little arithmetic per decision; evading also drives the actuators.
  costLf: { IDLE: 0.01, DETECT: 0.02, EVALUATE: 0.03, EVADE: 0.05, RESUME: 0.02 },
  // Without a rule, the cautious choice: look, assess, keep watching, keep evading, hold.
  fallback: { IDLE: 'detect', DETECT: 'evaluate', EVALUATE: 'stay', EVADE: 'stay', RESUME: 'stay' },
  buckets: collisionBuckets,
  bucket: collisionBucket,
  policy: collisionPolicy,
  describe: (o) =>
    `obstacle: ${o.obstacle ? 'yes' : 'no'}; distance ${fixed(o.distanceM)} m; closing speed ${fixed(o.closingSpeedMps)} m/s; bearing ${Math.round(o.bearingDeg)} deg`,
};
