/**
 * The heartbeat buffer (runtime/mcp/buffer.ts), pure: bounded, the oldest go when it is full,
 * every drop counted since the last drain and in all, and the counts always add up: pushed =
 * drained + held + dropped. A model (a plain array) checks any interleaving of pushes and drains.
 */
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { BoundedBuffer } from '../../runtime/mcp/buffer.js';

describe('BoundedBuffer', () => {
  it('keeps the newest `capacity` items, oldest first, and counts what it pushed out', () => {
    const b = new BoundedBuffer<number>(3);
    expect(b.push(1)).toBeUndefined();
    b.push(2);
    b.push(3);
    expect(b.push(4)).toBe(1);
    expect(b.push(5)).toBe(2);
    expect(b.length).toBe(3);
    expect(b.peekOldest()).toBe(3);
    expect(b.drain()).toEqual({ items: [3, 4, 5], countBefore: 3, droppedSinceLast: 2, droppedTotal: 2 });
    expect(b.drain()).toEqual({ items: [], countBefore: 0, droppedSinceLast: 0, droppedTotal: 2 });
    expect(b.peekOldest()).toBeUndefined();
  });

  it('250 into 100: 100 held (the last 100), 150 dropped; the next drain reports 0 since, 150 in all', () => {
    const b = new BoundedBuffer<number>(100);
    for (let i = 0; i < 250; i++) b.push(i);
    const d = b.drain();
    expect(d.items).toEqual(Array.from({ length: 100 }, (_, i) => 150 + i));
    expect(d).toMatchObject({ countBefore: 100, droppedSinceLast: 150, droppedTotal: 150 });
    expect(b.drain()).toMatchObject({ countBefore: 0, droppedSinceLast: 0, droppedTotal: 150 });
  });

  it('refuses a capacity that is not a positive integer', () => {
    for (const bad of [0, -1, 1.5, Number.NaN, Number.POSITIVE_INFINITY])
      expect(() => new BoundedBuffer(bad)).toThrow(/positive integer/);
  });

  it('property: against a model, any pushes and drains give the same items and counts, and pushed = drained + held + dropped', () => {
    const op = fc.oneof(fc.record({ push: fc.integer() }), fc.constant({ drain: true as const }));
    fc.assert(
      fc.property(fc.integer({ min: 1, max: 20 }), fc.array(op, { maxLength: 200 }), (capacity, ops) => {
        const b = new BoundedBuffer<number>(capacity);
        let model: number[] = [];
        let pushed = 0;
        let drained = 0;
        let droppedSince = 0;
        let droppedTotal = 0;
        for (const o of ops) {
          if ('push' in o) {
            pushed++;
            model.push(o.push);
            const out = b.push(o.push);
            if (model.length > capacity) {
              expect(out).toBe(model.shift());
              droppedSince++;
              droppedTotal++;
            } else expect(out).toBeUndefined();
          } else {
            const d = b.drain();
            expect(d).toEqual({
              items: model,
              countBefore: model.length,
              droppedSinceLast: droppedSince,
              droppedTotal,
            });
            drained += d.items.length;
            model = [];
            droppedSince = 0;
          }
          expect(b.length).toBeLessThanOrEqual(capacity);
          expect(b.length).toBe(model.length);
          expect(b.droppedSinceLast).toBe(droppedSince);
          expect(pushed).toBe(drained + b.length + b.droppedTotal);
        }
      }),
    );
  });
});
