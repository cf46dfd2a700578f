/**
 * core/maintenance-period.ts: a run's period is its job's UTC bucket holding the nominal time;
 * the nominal time comes from the schedule's search attribute, else the scheduled workflow id,
 * else the run's start. Property tests: see test/helpers/fast-check-setup.ts.
 */
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import {
  maintenanceJobNames,
  maintenanceJobs,
  nominalTime,
  nominalTimeFromWorkflowId,
  periodFromKey,
  periodOf,
  repeatNote,
} from '../../core/maintenance-period.js';
import { maintenanceSchedules } from '../../workers/schedules.js';

const t = (iso: string) => new Date(iso);

describe('periodOf', () => {
  it('buckets by day, hour and 6 hours, in UTC', () => {
    expect(periodOf('learning-decay', t('2026-11-24T03:00:00Z'))).toEqual({
      job: 'learning-decay',
      key: '2026-11-24',
      start: '2026-11-24T00:00:00.000Z',
      end: '2026-11-25T00:00:00.000Z',
    });
    expect(periodOf('process-log-cleanup', t('2026-11-24T23:59:59.999Z')).key).toBe('2026-11-24');
    expect(periodOf('process-log-cleanup', t('2026-11-25T00:00:00Z')).key).toBe('2026-11-25');
    expect(periodOf('abstracts-digest', t('2026-11-24T13:05:00Z'))).toMatchObject({
      key: '2026-11-24T13',
      start: '2026-11-24T13:00:00.000Z',
      end: '2026-11-24T14:00:00.000Z',
    });
    expect(periodOf('memory-pruning', t('2026-11-24T17:59:00Z'))).toMatchObject({
      key: '2026-11-24T12',
      end: '2026-11-24T18:00:00.000Z',
    });
    expect(periodOf('memory-pruning', t('2026-11-24T18:20:00Z')).key).toBe('2026-11-24T18');
    // A time in another offset is the same instant.
    expect(periodOf('learning-decay', t('2026-11-24T23:30:00-02:00')).key).toBe('2026-11-25');
    expect(() => periodOf('learning-decay', new Date(Number.NaN))).toThrow(RangeError);
  });

  it('property: the bucket holds the instant, has the job length, and its key names it back', () => {
    fc.assert(
      fc.property(
        fc.constantFrom(...maintenanceJobNames),
        fc.integer({ min: 0, max: 4_102_444_800_000 }),
        (job, ms) => {
          const p = periodOf(job, new Date(ms));
          const start = Date.parse(p.start);
          const end = Date.parse(p.end);
          expect(start).toBeLessThanOrEqual(ms);
          expect(ms).toBeLessThan(end);
          expect(end - start).toBe(maintenanceJobs[job].periodMs);
          expect(periodFromKey(job, p.key)).toEqual(p);
          // Two instants share a period exactly when they share a key.
          const other = periodOf(job, new Date(ms + maintenanceJobs[job].periodMs));
          expect(other.key).not.toBe(p.key);
          expect(other.start).toBe(p.end);
        },
      ),
    );
  });
});

describe('periodFromKey', () => {
  it("accepts only the job's own canonical keys", () => {
    expect(periodFromKey('learning-decay', '2026-11-24')?.start).toBe('2026-11-24T00:00:00.000Z');
    expect(periodFromKey('learning-decay', '2026-11-24T00')).toBeUndefined();
    expect(periodFromKey('abstracts-digest', '2026-11-24')).toBeUndefined();
    expect(periodFromKey('abstracts-digest', '2026-11-24T07')?.end).toBe('2026-11-24T08:00:00.000Z');
    expect(periodFromKey('memory-pruning', '2026-11-24T06')?.key).toBe('2026-11-24T06');
    expect(periodFromKey('memory-pruning', '2026-11-24T05')).toBeUndefined();
    expect(periodFromKey('learning-decay', '2026-13-40')).toBeUndefined();
    expect(periodFromKey('learning-decay', "2026-11-24'; drop table learnings")).toBeUndefined();
  });
});

describe('nominal time', () => {
  it('reads the time a schedule appends to its workflow ids', () => {
    expect(nominalTimeFromWorkflowId('maintenance/learning-decay-2026-11-24T03:00:00Z')).toEqual(
      t('2026-11-24T03:00:00Z'),
    );
    expect(nominalTimeFromWorkflowId('maintenance/learning-decay')).toBeUndefined();
    expect(nominalTimeFromWorkflowId('maintenance/learning-decay-2026-11-24')).toBeUndefined();
    expect(nominalTimeFromWorkflowId('x-2026-02-31T03:00:00Z')).toBeUndefined();
    expect(nominalTimeFromWorkflowId('x-2026-02-28T03:00:00.250Z')).toEqual(t('2026-02-28T03:00:00.250Z'));
  });

  it('prefers the search attribute, then the workflow id, then the start time', () => {
    const startTime = t('2026-11-30T12:00:00Z');
    const workflowId = 'maintenance/learning-decay-2026-11-24T03:00:00Z';
    expect(nominalTime({ scheduledStartTime: t('2026-11-20T03:00:00Z'), workflowId, startTime })).toEqual({
      at: t('2026-11-20T03:00:00Z'),
      source: 'schedule',
    });
    expect(nominalTime({ scheduledStartTime: undefined, workflowId, startTime })).toEqual({
      at: t('2026-11-24T03:00:00Z'),
      source: 'workflow-id',
    });
    expect(nominalTime({ scheduledStartTime: null, workflowId: 'maintenance/learning-decay', startTime })).toEqual({
      at: startTime,
      source: 'start',
    });
    expect(nominalTime({ scheduledStartTime: new Date(Number.NaN), workflowId: 'by-hand', startTime }).source).toBe(
      'start',
    );
  });

  it('says what a repeat did', () => {
    expect(repeatNote('learning-decay', '2026-11-24', '2026-11-24T03:00:01.000Z')).toBe(
      'learning-decay for 2026-11-24 already done at 2026-11-24T03:00:01.000Z: nothing changed',
    );
  });
});

describe('the schedules and the periods agree', () => {
  it('each maintenance schedule runs its job once per period, its offset inside the period', () => {
    const ms = (every: string) => {
      const [n, unit] = every.split(' ');
      return (
        Number(n) *
        (
          {
            minute: 60_000,
            minutes: 60_000,
            hour: 3_600_000,
            hours: 3_600_000,
            day: 86_400_000,
            days: 86_400_000,
          } as Record<string, number>
        )[unit!]!
      );
    };
    expect(maintenanceSchedules.map((s) => s.workflowType).sort()).toEqual(
      maintenanceJobNames.map((j) => maintenanceJobs[j].workflowType).sort(),
    );
    for (const job of maintenanceJobNames) {
      const s = maintenanceSchedules.find((x) => x.workflowType === maintenanceJobs[job].workflowType)!;
      expect(ms(s.every), job).toBe(maintenanceJobs[job].periodMs);
      expect(ms(s.offset ?? '0 minutes'), job).toBeLessThan(maintenanceJobs[job].periodMs);
    }
  });
});
