/**
 * What a tick's stored prompt keeps (core/tick-prompt.ts): every message whole when they fit;
 * over the cap, a fair share each (a short message whole, the long ones their beginnings, each
 * marked with its full length); never more than the cap, never half a character; text Postgres
 * refuses dropped.
 */
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { sanitizeText, utf8Bytes } from '../../core/sanitize.js';
import { promptForRecord, tickPromptLimits } from '../../core/tick-prompt.js';

const stored = (p: ReturnType<typeof promptForRecord>) => p.messages.reduce((n, m) => n + utf8Bytes(m.content), 0);

describe('promptForRecord', () => {
  it('keeps every message whole, roles in order, when they fit', () => {
    const messages = [
      { role: 'system' as const, content: 'who you are' },
      { role: 'user' as const, content: 'tick 4: «hello» 🌱' },
    ];
    expect(promptForRecord(messages)).toEqual({
      messages,
      chars: messages[0]!.content.length + messages[1]!.content.length,
    });
  });

  it('over the cap: a short message stays whole, the long ones share the rest and say how long they were', () => {
    const system = 'S'.repeat(50_000);
    const user = 'U'.repeat(40_000);
    const focus = 'F'.repeat(1_000);
    const p = promptForRecord([
      { role: 'system', content: system },
      { role: 'user', content: user },
      { role: 'user', content: focus },
    ]);
    expect(p.chars).toBe(91_000);
    expect(p.messages[2]).toEqual({ role: 'user', content: focus });
    const share = Math.floor((tickPromptLimits.maxBytes - 1_000) / 2);
    expect(p.messages[0]).toEqual({ role: 'system', content: system.slice(0, share), chars: 50_000 });
    expect(p.messages[1]).toEqual({ role: 'user', content: user.slice(0, share), chars: 40_000 });
    expect(stored(p)).toBeLessThanOrEqual(tickPromptLimits.maxBytes);
  });

  it('drops what Postgres refuses (NUL, lone surrogates) and keeps the rest as sent', () => {
    const p = promptForRecord([{ role: 'user', content: 'a\u0000b\ud800c' }]);
    expect(p.messages).toEqual([{ role: 'user', content: 'ab\ufffdc' }]);
  });

  it('never stores more than the cap, each text a prefix of what was sent, cut on a character', () => {
    fc.assert(
      fc.property(
        fc.array(fc.string({ unit: 'binary', maxLength: 3_000 }), { minLength: 1, maxLength: 5 }),
        fc.integer({ min: 16, max: 6_000 }),
        (texts, cap) => {
          const clean = texts.map(sanitizeText);
          const p = promptForRecord(
            clean.map((content) => ({ role: 'user' as const, content })),
            cap,
          );
          expect(stored(p)).toBeLessThanOrEqual(cap);
          p.messages.forEach((m, i) => {
            expect(clean[i]!.startsWith(m.content)).toBe(true);
            expect(m.content).not.toMatch(/[\ud800-\udbff]$/);
            expect(m.chars === undefined).toBe(m.content === clean[i]);
            if (m.chars !== undefined) expect(m.chars).toBe(clean[i]!.length);
          });
          if (clean.reduce((n, t) => n + utf8Bytes(t), 0) <= cap)
            expect(p.messages.every((m) => m.chars === undefined)).toBe(true);
        },
      ),
      { numRuns: 300 },
    );
  });
});
