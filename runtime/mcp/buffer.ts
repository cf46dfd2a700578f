/**
 * A bounded first-in first-out buffer that never blocks and never grows: when it is full, a new
 * item pushes the oldest one out, and every item pushed out is counted (since the last drain and
 * in all). Draining hands over everything held, oldest first, with those counts. Pure.
 *
 * At any moment: pushed = drained + held + dropped_total.
 */
interface Drained<T> {
  /** What was held, oldest first. */
  items: T[];
  /** How many items were held just before the drain (= items.length). */
  countBefore: number;
  /** Items pushed out since the previous drain. */
  droppedSinceLast: number;
  /** Items pushed out since the buffer was made. */
  droppedTotal: number;
}

export class BoundedBuffer<T> {
  private readonly slots: Array<T | undefined>;
  /** Index of the oldest item. */
  private head = 0;
  private held = 0;
  private droppedSince = 0;
  private dropped = 0;

  constructor(readonly capacity: number) {
    if (!Number.isInteger(capacity) || capacity < 1)
      throw new RangeError(`buffer capacity must be a positive integer, got ${capacity}`);
    this.slots = new Array<T | undefined>(capacity);
  }

  get length(): number {
    return this.held;
  }

  get droppedSinceLast(): number {
    return this.droppedSince;
  }

  get droppedTotal(): number {
    return this.dropped;
  }

  /** Add `item`; when full, the oldest item goes first. Returns the item pushed out, if any. */
  push(item: T): T | undefined {
    if (this.held < this.capacity) {
      this.slots[(this.head + this.held) % this.capacity] = item;
      this.held++;
      return undefined;
    }
    const out = this.slots[this.head];
    this.slots[this.head] = item;
    this.head = (this.head + 1) % this.capacity;
    this.droppedSince++;
    this.dropped++;
    return out;
  }

  /** The oldest item held, without taking it. */
  peekOldest(): T | undefined {
    return this.held ? this.slots[this.head] : undefined;
  }

  /** Take everything held (oldest first) and the drop counts; the count since the last drain starts again at 0. */
  drain(): Drained<T> {
    const items: T[] = [];
    for (let i = 0; i < this.held; i++) {
      const at = (this.head + i) % this.capacity;
      items.push(this.slots[at] as T);
      this.slots[at] = undefined;
    }
    const out = { items, countBefore: this.held, droppedSinceLast: this.droppedSince, droppedTotal: this.dropped };
    this.head = 0;
    this.held = 0;
    this.droppedSince = 0;
    return out;
  }
}
