/**
 * Model text made safe where it enters (core/sanitize.ts), and the caps on what rides through
 * history (core/payload-caps.ts): unit tests, fast-check properties over hostile strings (full
 * unicode, control characters, unpaired surrogates), and a smaller property against the real
 * Postgres (text and jsonb columns) and Temporal's payload converter.
 */
import { defaultPayloadConverter } from '@temporalio/common';
import fc from 'fast-check';
import pg from 'pg';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { CommandRejection, ParsedCommand } from '../../core/loop-types.js';
import { boundForHistory, capCommands, capRejections, historyCaps } from '../../core/payload-caps.js';
import { appendToolCalls, parseReply, renderCommandBlock } from '../../core/reply-parser.js';
import {
  clipText,
  defaultMaxReplyBytes,
  jsonBytes,
  sanitizeAnswer,
  sanitizeJson,
  sanitizeText,
  truncateUtf8,
  utf8Bytes,
  type ModelToolCall,
} from '../../core/sanitize.js';
import { freshPostgresDatabase } from '../helpers/env.js';

const controls = /[\u0000-\u0008\u000B\u000C\u000E-\u001F\u0080-\u009F]/;
// With the `u` flag a surrogate pair is one code point: \p{Cs} matches only unpaired halves.
const loneSurrogate = /\p{Cs}/u;

/** Every string and key in a JSON-like value that Postgres or a UTF-8 payload would refuse or alter. */
function unsafeStrings(value: unknown, out: string[] = []): string[] {
  if (typeof value === 'string') {
    if (controls.test(value) || loneSurrogate.test(value)) out.push(value);
  } else if (Array.isArray(value)) value.forEach((v) => unsafeStrings(v, out));
  else if (value && typeof value === 'object') {
    for (const [k, v] of Object.entries(value)) {
      unsafeStrings(k, out);
      unsafeStrings(v, out);
    }
  }
  return out;
}

/** One character a hostile model might write: NUL, C1, lone surrogates, markers' pieces, any code unit or point. */
const hostileChar = fc.oneof(
  fc.constantFrom(
    '\u0000',
    '\ud800',
    '\udfff',
    '\u0085',
    '\u009f',
    '\u001b',
    '\u2028',
    '\n',
    '\r',
    '\t',
    '"',
    '\\',
    '<',
    '>',
    '{',
    '[',
  ),
  fc.integer({ min: 0, max: 0xffff }).map((c) => String.fromCharCode(c)),
  fc.string({ unit: 'binary', minLength: 1, maxLength: 1 }),
);
const hostileString = fc.string({ unit: hostileChar, maxLength: 120 });
const hostileJson = fc.letrec((tie) => ({
  value: fc.oneof(
    { depthSize: 'small' },
    hostileString,
    fc.integer(),
    fc.double(),
    fc.boolean(),
    fc.constant(null),
    fc.array(tie('value'), { maxLength: 4 }),
    tie('object'),
  ),
  object: fc.dictionary(hostileString, tie('value'), { maxKeys: 4 }),
})).object as fc.Arbitrary<Record<string, unknown>>;

/** A reply as a hostile model might write it: prose, a command block (JSON escapes included), native tool calls. */
const hostileReply = fc.record({
  prose: hostileString,
  commands: fc.array(
    fc.record({
      cmdId: hostileString,
      type: fc.oneof(fc.constant('diary.add'), hostileString),
      args: hostileJson,
      big: fc.oneof(fc.constant(0), fc.nat({ max: 10_000 })),
    }),
    { maxLength: 60 },
  ),
  raw: fc.oneof(fc.constant(''), hostileString),
  calls: fc.array(
    fc.record({
      id: hostileString,
      name: hostileString,
      args: hostileJson,
      rawArgs: fc.option(hostileString, { nil: undefined }),
    }),
    { maxLength: 60 },
  ),
});

function replyText(r: {
  prose: string;
  commands: Array<{ cmdId: string; type: string; args: Record<string, unknown>; big: number }>;
  raw: string;
}): string {
  // renderCommandBlock writes JSON.stringify's escapes (\u0000, \ud800): they become characters
  // again only when the parser reads the block, after the text itself was sanitised.
  const block = renderCommandBlock(
    r.commands.map((c) => ({
      cmdId: c.cmdId,
      type: c.type,
      args: c.big ? { ...c.args, big: 'x'.repeat(c.big) } : c.args,
    })),
  );
  return `${r.prose}\n${block}\n${r.raw}`;
}

/** What think does with an answer: sanitise and cap at the boundary, record tool calls, parse, bound for history. */
function pipeline(text: string, calls: ModelToolCall[], maxBytes = defaultMaxReplyBytes) {
  const clean = sanitizeAnswer({ text, toolCalls: calls }, maxBytes);
  const recorded = appendToolCalls(clean.text, clean.toolCalls);
  const parsed = parseReply(recorded);
  const result = boundForHistory({
    responseId: 1,
    summary: parsed.body,
    provider: 'openai',
    model: 'gpt-hostile',
    commands: parsed.commands,
    rejected: parsed.rejected,
    parseErrors: parsed.errors,
    confidence: parsed.confidence,
    unverifiedFacts: parsed.unverifiedFacts.length,
    notesShown: 0,
    promptChars: 0,
    replayed: false,
  });
  return { clean, recorded, parsed, result };
}

describe('sanitizeText', () => {
  it('removes NUL and the other C0/C1 controls but keeps tab, newline and carriage return', () => {
    expect(sanitizeText('a\u0000b\u0001c\u001bd\u007fe\u0085f\u009fg\th\ni\rj')).toBe('abcd\u007fefg\th\ni\rj');
  });

  it('replaces lone surrogates with U+FFFD and keeps pairs', () => {
    expect(sanitizeText('x\ud800')).toBe('x\uFFFD');
    expect(sanitizeText('\udc00y')).toBe('\uFFFDy');
    expect(sanitizeText('\udc00\ud800')).toBe('\uFFFD\uFFFD');
    expect(sanitizeText('ok 😀 \ud83d\ude00')).toBe('ok 😀 😀');
  });

  it('returns clean text unchanged', () => {
    const s = 'Plain text, ünïcödé, 日本語, 😀.\n';
    expect(sanitizeText(s)).toBe(s);
  });
});

describe('UTF-8 sizes and cuts', () => {
  it('utf8Bytes agrees with Buffer.byteLength on well-formed text', () => {
    for (const s of ['', 'abc', 'é', '日本', '😀', 'a😀b€']) expect(utf8Bytes(s)).toBe(Buffer.byteLength(s, 'utf8'));
  });

  it('truncateUtf8 stays within the cap and never splits a surrogate pair', () => {
    expect(truncateUtf8('😀😀', 5)).toBe('😀');
    expect(truncateUtf8('😀😀', 3)).toBe('');
    expect(truncateUtf8('aé日', 4)).toBe('aé');
    expect(truncateUtf8('abc', 10)).toBe('abc');
  });

  it('clipText adds an ellipsis and keeps pairs whole', () => {
    expect(clipText('abcdef', 4)).toBe('abc…');
    expect(clipText('ab😀cd', 4)).toBe('ab…');
  });
});

describe('sanitizeJson', () => {
  it('sanitises strings and keys at every depth', () => {
    expect(sanitizeJson({ 'k\u0000': ['x\ud800', { 'y\u0085': 'z\u0000' }], n: 1, b: true, z: null })).toEqual({
      k: ['x\uFFFD', { y: 'z' }],
      n: 1,
      b: true,
      z: null,
    });
  });

  it('keeps "__proto__" as a plain key', () => {
    const out = sanitizeJson(JSON.parse('{"__proto__": {"polluted": "\\u0000yes"}}')) as Record<string, unknown>;
    expect(Object.getPrototypeOf(out)).toBe(Object.prototype);
    expect(Object.keys(out)).toEqual(['__proto__']);
    expect(({} as Record<string, unknown>).polluted).toBeUndefined();
  });

  it('cuts nesting past its depth limit instead of recursing without bound', () => {
    let deep: unknown = 'bottom';
    for (let i = 0; i < 10_000; i++) deep = [deep];
    const out = sanitizeJson(deep);
    expect(JSON.stringify(out)).toContain('[nested too deep]');
    expect(JSON.stringify(out).length).toBeLessThan(200);
  });

  it('turns what JSON cannot hold into null', () => {
    expect(sanitizeJson({ a: Number.NaN, b: Infinity, c: undefined })).toEqual({ a: null, b: null, c: null });
  });
});

describe('sanitizeAnswer', () => {
  it('caps a 5 MB reply at the configured size and records the cut', () => {
    const text = 'word '.repeat(1_000_000);
    const out = sanitizeAnswer({ text }, 256 * 1024);
    expect(utf8Bytes(out.text)).toBeLessThanOrEqual(256 * 1024);
    expect(out.text).toBe(text.slice(0, 256 * 1024));
    expect(out.truncated).toEqual({ originalBytes: 5_000_000, keptBytes: 256 * 1024, droppedToolCalls: 0 });
  });

  it('records nothing when the answer fits', () => {
    expect(sanitizeAnswer({ text: 'short\u0000' })).toEqual({ text: 'short', toolCalls: [] });
  });

  it('sanitises tool-call names, ids and arguments (keys too)', () => {
    const out = sanitizeAnswer({
      text: '',
      toolCalls: [{ id: 'c\u0000', name: 'db\ud800', args: { 'ti\u0000tle': 'x\ud800' } }],
    });
    expect(out.toolCalls).toEqual([{ id: 'c', name: 'db\uFFFD', args: { title: 'x\uFFFD' } }]);
  });

  it('replaces the arguments of a tool call that no longer fits with an error', () => {
    const out = sanitizeAnswer(
      { text: 'hi', toolCalls: [{ id: 't1', name: 'nope', args: { blob: 'x'.repeat(1_000_000) } }] },
      64 * 1024,
    );
    expect(out.toolCalls).toHaveLength(1);
    expect(out.toolCalls[0]).toMatchObject({
      id: 't1',
      name: 'nope',
      error: expect.stringMatching(/^arguments of \d+ bytes dropped/),
    });
    expect(out.toolCalls[0]!.args).toBeUndefined();
    expect(out.toolCalls[0]!.rawArgs!.length).toBeLessThanOrEqual(500);
    expect(out.truncated?.originalBytes).toBeGreaterThan(1_000_000);
    expect(jsonBytes(out)).toBeLessThan(64 * 1024 + 1024);
  });
});

describe('caps on what rides through history', () => {
  const cmd = (i: number, args: Record<string, unknown> = {}): ParsedCommand => ({
    cmdId: `c${i}`,
    type: 'diary.add',
    args,
  });

  it('keeps 50 commands of 10 000 and reports the rest in ONE rejection', () => {
    const out = capCommands(
      Array.from({ length: 10_000 }, (_, i) => cmd(i)),
      [],
    );
    expect(out.commands).toHaveLength(historyCaps.maxCommands);
    expect(out.rejected).toEqual([{ raw: '', reason: '9950 more commands dropped: at most 50 commands in one reply' }]);
  });

  it('rejects a command whose args are over 8 KB, saying so', () => {
    const out = capCommands([cmd(1, { content: 'x'.repeat(9000) }), cmd(2, { content: 'ok' })], []);
    expect(out.commands.map((c) => c.cmdId)).toEqual(['c2']);
    expect(out.rejected).toHaveLength(1);
    expect(out.rejected[0]).toMatchObject({
      cmdId: 'c1',
      type: 'diary.add',
      reason: expect.stringMatching(/^args of 90\d\d bytes: at most 8192 bytes a command$/),
    });
    expect(out.rejected[0]!.raw.length).toBeLessThanOrEqual(historyCaps.maxRawChars);
  });

  it('keeps at most 20 rejections, texts cut, the last one counting the rest', () => {
    const many = Array.from({ length: 1000 }, (_, i) => ({
      cmdId: `r${i}`,
      raw: 'r'.repeat(5000),
      reason: 'why '.repeat(500),
    }));
    const out = capRejections(many);
    expect(out).toHaveLength(20);
    expect(
      out
        .slice(0, 19)
        .every((r) => r.raw.length <= historyCaps.maxRawChars && r.reason.length <= historyCaps.maxReasonChars),
    ).toBe(true);
    expect(out[19]).toEqual({
      raw: '',
      reason: '981 more commands dropped: at most 20 rejections are reported per reply',
    });
    // A summary that is itself summarised is counted for what it stands for: of 19 + 1 + 5
    // entries, 2 are kept; the rest is 17 rejections, the 981 of the summary and 5 more.
    const again = capRejections([...out, ...many.slice(0, 5)], historyCaps, 3);
    expect(again).toHaveLength(3);
    expect(again[2]!.reason).toBe(`${17 + 981 + 5} more commands dropped: at most 3 rejections are reported per reply`);
  });

  it('drops commands from the end until the result is under 48 KB', () => {
    const fat = Array.from({ length: 50 }, (_, i) => cmd(i, { content: 'x'.repeat(8000) }));
    const out = boundForHistory({ summary: 's', commands: fat, rejected: [] as CommandRejection[], parseErrors: [] });
    expect(jsonBytes(out)).toBeLessThan(historyCaps.maxResultBytes);
    expect(out.commands.length).toBeGreaterThan(0);
    expect(out.commands.length).toBeLessThan(50);
    expect(out.rejected.at(-1)!.reason).toBe(
      `${50 - out.commands.length} more commands dropped: a tick carries at most 49152 bytes of commands and rejections`,
    );
  });

  it('leaves a small result as it is', () => {
    const small = {
      summary: 'hello',
      commands: [cmd(1, { title: 't' })],
      rejected: [],
      parseErrors: ['one'],
      extra: 7,
    };
    expect(boundForHistory(small)).toEqual(small);
  });

  it('keeps the payload under 64 KB for a 256 KB reply of 5 KB commands (and for 10 000 commands)', () => {
    const fiveK = Array.from({ length: 60 }, (_, i) => cmd(i, { content: '日'.repeat(1700) }));
    const big = pipeline(`prose\n${renderCommandBlock(fiveK)}`, []);
    expect(big.clean.truncated).toBeDefined();
    expect(defaultPayloadConverter.toPayload(big.result)!.data!.length).toBeLessThan(64 * 1024);
    const many = pipeline(renderCommandBlock(Array.from({ length: 10_000 }, (_, i) => cmd(i, { t: i }))), []);
    expect(many.result.commands.length).toBeLessThanOrEqual(50);
    expect(many.result.rejected.length).toBeLessThanOrEqual(20);
    expect(defaultPayloadConverter.toPayload(many.result)!.data!.length).toBeLessThan(64 * 1024);
  });

  it('keeps 10 000 native tool calls to 50 commands and one summary', () => {
    const calls = Array.from({ length: 10_000 }, (_, i) => ({
      id: `t${i}`,
      name: 'database',
      args: { action: 'query', args: { q: i } },
    }));
    const { result } = pipeline('', calls);
    expect(result.commands).toHaveLength(50);
    expect(result.rejected.length).toBe(1);
    expect(result.rejected[0]!.reason).toMatch(/^\d+ more commands dropped: at most 50 commands in one reply$/);
  });

  it('sanitises JSON escapes inside command args (the parser turns them into characters)', () => {
    const { result } = pipeline(
      `x\n<<<COMMANDS\n[{"cmd_id":"a\\u0000","type":"diary.add","args":{"ti\\u0000tle":"x\\ud800","c":["\\u0085"]}}]\nCOMMANDS>>>`,
      [],
    );
    expect(result.commands).toEqual([{ cmdId: 'a', type: 'diary.add', args: { title: 'x\uFFFD', c: [''] } }]);
  });
});

describe('properties (fast-check)', () => {
  it('sanitizeAnswer: no NUL, no control, no lone surrogate, JSON round trip, within the cap', () => {
    fc.assert(
      fc.property(
        fc.string({ unit: hostileChar, maxLength: 400 }),
        fc.integer({ min: 1024, max: 4096 }),
        (text, cap) => {
          const padded = text.repeat(1 + Math.floor(cap / 200)); // often over the cap
          const out = sanitizeAnswer({ text: padded }, cap);
          expect(out.text).not.toMatch(controls);
          expect(out.text).not.toMatch(loneSurrogate);
          expect(JSON.parse(JSON.stringify(out.text))).toBe(out.text);
          expect(utf8Bytes(out.text)).toBeLessThanOrEqual(cap);
          expect(new TextEncoder().encode(out.text).length).toBe(utf8Bytes(out.text));
          // Nothing is lost but what the cap cuts: the kept text is a prefix of the sanitised one.
          expect(sanitizeText(padded).startsWith(out.text)).toBe(true);
          expect(out.truncated !== undefined).toBe(out.text !== sanitizeText(padded));
        },
      ),
    );
  });

  it('parse/sanitise/cap never throws and gives payloads Temporal takes under 64 KB', () => {
    fc.assert(
      fc.property(
        fc.oneof(
          hostileReply,
          hostileString.map((prose) => ({ prose, commands: [], raw: '', calls: [] })),
        ),
        (r) => {
          const { clean, recorded, result } = pipeline(replyText(r), r.calls);
          expect(unsafeStrings(clean)).toEqual([]);
          expect(unsafeStrings(result)).toEqual([]);
          expect(recorded).not.toMatch(controls);
          expect(jsonBytes(result)).toBeLessThan(historyCaps.maxResultBytes);
          expect(result.commands.length).toBeLessThanOrEqual(historyCaps.maxCommands);
          expect(result.rejected.length).toBeLessThanOrEqual(historyCaps.maxRejected);
          for (const c of result.commands) expect(jsonBytes(c.args)).toBeLessThanOrEqual(historyCaps.maxArgsBytes);
          const payload = defaultPayloadConverter.toPayload(result)!;
          expect(payload.data!.length).toBeLessThan(64 * 1024);
          expect(defaultPayloadConverter.fromPayload(payload)).toEqual(JSON.parse(JSON.stringify(result)));
        },
      ),
    );
  });
});

describe('sanitised values in the real Postgres (text and jsonb)', () => {
  let client: pg.Client;
  let drop: () => Promise<void>;
  beforeAll(async () => {
    const fresh = await freshPostgresDatabase('sanitize');
    drop = fresh.drop;
    client = new pg.Client({ connectionString: fresh.url });
    await client.connect();
    await client.query(
      'create temp table hostile (id serial primary key, reply text not null, result jsonb not null, args jsonb not null)',
    );
  });
  afterAll(async () => {
    await client?.end();
    await drop?.();
  });

  it('the raw values fail where the sanitised ones go in (the test can tell them apart)', async () => {
    await expect(
      client.query('insert into hostile (reply, result, args) values ($1, $2, $3)', ['a\u0000b', '{}', '{}']),
    ).rejects.toThrow();
    await expect(
      client.query('insert into hostile (reply, result, args) values ($1, $2, $3)', [
        'ok',
        JSON.stringify({ t: 'x\ud800' }),
        '{}',
      ]),
    ).rejects.toThrow();
    await client.query('insert into hostile (reply, result, args) values ($1, $2, $3)', [
      sanitizeText('a\u0000b'),
      JSON.stringify(sanitizeJson({ t: 'x\ud800' })),
      '{}',
    ]);
  });

  it('inserts every sanitised reply, result and command args, and reads them back unchanged', async () => {
    await fc.assert(
      fc.asyncProperty(hostileReply, async (r) => {
        const { recorded, result } = pipeline(replyText(r), r.calls);
        const args = result.commands.map((c) => c.args);
        const { rows } = await client.query<{ reply: string; result: unknown; args: unknown }>(
          'insert into hostile (reply, result, args) values ($1, $2, $3) returning reply, result, args',
          [recorded, JSON.stringify(result), JSON.stringify(args)],
        );
        expect(rows[0]!.reply).toBe(recorded);
        expect(rows[0]!.result).toEqual(JSON.parse(JSON.stringify(result)));
        expect(rows[0]!.args).toEqual(JSON.parse(JSON.stringify(args)));
      }),
      { numRuns: 150 },
    );
  });
});
