/** The strict JSON parser agrees with JSON.parse on what is JSON, and on its value. */
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { lineColumn, maxJsonDepth, parseStrictJson } from '../../core/strict-json.js';

function jsonParse(s: string): { ok: true; value: unknown } | { ok: false } {
  try {
    return { ok: true, value: JSON.parse(s) as unknown };
  } catch {
    return { ok: false };
  }
}

describe('parseStrictJson', () => {
  it('gives JSON.parse’s value for any serialized JSON value', () => {
    fc.assert(
      fc.property(fc.jsonValue({ maxDepth: 10 }), fc.boolean(), (v, pretty) => {
        const text = JSON.stringify(v, null, pretty ? 2 : undefined);
        const r = parseStrictJson(text);
        expect(r).toEqual({ ok: true, value: JSON.parse(text) });
      }),
    );
  });

  it('accepts exactly what JSON.parse accepts (shallow inputs)', () => {
    const piece = fc.oneof(
      fc.constantFrom(
        '{',
        '}',
        '[',
        ']',
        '"',
        ',',
        ':',
        ' ',
        '\n',
        'true',
        'nul',
        '-',
        '0',
        '1.5e3',
        '01',
        '\\',
        '\\u00e9',
        "'",
        '//',
      ),
      fc.string({ maxLength: 4 }),
    );
    fc.assert(
      fc.property(
        fc.array(piece, { maxLength: 20 }).map((xs) => xs.join('')),
        (text) => {
          const mine = parseStrictJson(text);
          const theirs = jsonParse(text);
          expect(mine.ok).toBe(theirs.ok);
          if (mine.ok && theirs.ok) expect(mine.value).toEqual(theirs.value);
          if (!mine.ok) expect(mine.offset).toBeLessThanOrEqual(text.length);
        },
      ),
    );
  });

  it(`refuses nesting deeper than ${maxJsonDepth} instead of overflowing the stack`, () => {
    const r = parseStrictJson('['.repeat(100_000));
    expect(r).toMatchObject({ ok: false, message: `nesting deeper than ${maxJsonDepth} levels` });
  });

  it('reports 1-based line and column', () => {
    expect(lineColumn('ab\ncd', 4)).toEqual({ line: 2, column: 2 });
    expect(lineColumn('', 0)).toEqual({ line: 1, column: 1 });
  });
});
