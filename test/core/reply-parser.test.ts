/**
 * The reply parser: every accepted form, every malformed case, and two
 * properties — it never throws, and rendered commands parse back unchanged.
 */
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import type { ParsedCommand } from '../../core/loop-types.js';
import {
  COMMANDS_END,
  COMMANDS_START,
  FACTS_END,
  FACTS_START,
  maxCommandsPerReply,
  parseReply,
  renderCommandBlock,
  renderFactsBlock,
  replyFormatInstructions,
} from '../../core/reply-parser.js';

const block = (json: string) => `${COMMANDS_START}\n${json}\n${COMMANDS_END}`;

describe('command blocks', () => {
  it('parses a JSON array between the markers and strips it from the body', () => {
    const reply = `I will write this down.\n${block(
      '[{"cmd_id":"c1","type":"diary.add","args":{"title":"t","content":"c"},"description":"remember"},{"cmd_id":"c2","type":"tasks.list","args":{}}]',
    )}\nDone.`;
    const r = parseReply(reply);
    expect(r.errors).toEqual([]);
    expect(r.rejected).toEqual([]);
    expect(r.commands).toEqual([
      { cmdId: 'c1', type: 'diary.add', args: { title: 't', content: 'c' }, description: 'remember' },
      { cmdId: 'c2', type: 'tasks.list', args: {} },
    ]);
    expect(r.body).toBe('I will write this down.\n\nDone.');
  });

  it('accepts a single object, missing args, numeric cmd_id and loosely written types', () => {
    const r = parseReply(block('{"cmd_id": 7, "type": " Diary/List "}'));
    expect(r.commands).toEqual([{ cmdId: '7', type: 'diary.list', args: {} }]);
    expect(r.errors).toEqual([]);
  });

  it('accepts a ```json fence inside the markers, and a block wrapped in a fence', () => {
    const inner = parseReply(
      `${COMMANDS_START}\n\`\`\`json\n[{"cmd_id":"a","type":"help","args":{}}]\n\`\`\`\n${COMMANDS_END}`,
    );
    expect(inner.commands).toHaveLength(1);
    expect(inner.errors).toEqual([]);
    const outer = parseReply(`Thinking.\n\`\`\`json\n${block('[{"cmd_id":"a","type":"help"}]')}\n\`\`\``);
    expect(outer.commands).toHaveLength(1);
    expect(outer.body).toBe('Thinking.');
  });

  it('leaves code blocks of the body alone', () => {
    const body = 'See:\n```js\nconst a = 1;\n```\n```py\nb = 2\n```';
    expect(parseReply(`${body}\n${block('[]')}`).body).toBe(body);
  });

  it('accepts several blocks; a duplicate cmd_id across them is rejected', () => {
    const r = parseReply(
      `one ${block('[{"cmd_id":"a","type":"help"}]')} two ${block('[{"cmd_id":"a","type":"diary.list"},{"cmd_id":"b","type":"diary.list"}]')} three`,
    );
    expect(r.commands.map((c) => c.cmdId)).toEqual(['a', 'b']);
    expect(r.rejected).toHaveLength(1);
    expect(r.rejected[0]).toMatchObject({ cmdId: 'a', type: 'diary.list' });
    expect(r.rejected[0]!.reason).toMatch(/commands block 2 item 1: duplicate cmd_id 'a'/);
    expect(r.body).toBe('one  two  three');
  });

  it('accepts the {"commands": [...]} wrapper', () => {
    expect(parseReply(block('{"commands":[{"cmd_id":"a","type":"help"}]}')).commands).toHaveLength(1);
  });

  it('rejects items without cmd_id, without type, with non-object args, or that are not objects', () => {
    const r = parseReply(
      block(
        JSON.stringify([
          { type: 'diary.list' },
          { cmd_id: '  ', type: 'diary.list' },
          { cmd_id: 'b' },
          { cmd_id: 'c', type: 42 },
          { cmd_id: 'd', type: 'diary.add', args: ['x'] },
          { cmd_id: 'e', type: 'diary.add', args: 'title=x' },
          { cmd_id: 'f', type: 'diary.add', description: 5 },
          { cmd_id: ['g'], type: 'help' },
          'help',
          { cmd_id: 'x'.repeat(65), type: 'help' },
          { cmd_id: 'ok', type: 'help' },
        ]),
      ),
    );
    expect(r.commands).toEqual([{ cmdId: 'ok', type: 'help', args: {} }]);
    expect(r.rejected.map((x) => x.reason.replace(/^commands block 1 item \d+: /, ''))).toEqual([
      'missing cmd_id',
      'missing cmd_id',
      'missing type',
      'type must be a string such as "diary.add", found a number',
      'args must be a JSON object, found an array',
      'args must be a JSON object, found a string',
      'description must be a string, found a number',
      'cmd_id must be a string, found an array',
      'a command must be a JSON object with cmd_id, type and args, found a string',
      'cmd_id longer than 64 characters',
    ]);
    expect(r.rejected[0]).toMatchObject({ type: 'diary.list', raw: '{"type":"diary.list"}' });
    expect(r.rejected[2]).toMatchObject({ cmdId: 'b' });
  });

  it(`drops commands beyond ${maxCommandsPerReply} in one reply with one summary rejection`, () => {
    const many = Array.from({ length: 10_000 }, (_, i) => ({ cmd_id: `c${i}`, type: 'help' }));
    const r = parseReply(block(JSON.stringify(many)));
    expect(r.commands).toHaveLength(maxCommandsPerReply);
    expect(r.rejected).toEqual([
      { raw: '', reason: `${10_000 - maxCommandsPerReply} more commands dropped: at most 50 commands in one reply` },
    ]);
  });

  it('reports invalid JSON precisely: trailing comma, with its line and column in the reply', () => {
    const reply = `Line one\n${COMMANDS_START}\n[\n  {"cmd_id": "a", "type": "help"},\n]\n${COMMANDS_END}`;
    const r = parseReply(reply);
    expect(r.commands).toEqual([]);
    expect(r.errors).toEqual(["commands block 1: invalid JSON at line 5, column 1: trailing comma before ']'"]);
    expect(r.body).toBe('Line one');
  });

  it.each([
    ['{"cmd_id": "a", "type": "help",}', "trailing comma before '}'"],
    ["[{'cmd_id': 'a'}]", "expected a double-quoted property name, found ' (strings need double quotes)"],
    ['[{"cmd_id": "a"} {"cmd_id": "b"}]', "expected ',' or ']' after array element, found '{'"],
    ['[{"cmd_id" "a"}]', "expected ':' after property name, found '\"'"],
    [
      '[{"cmd_id": "a", // comment\n}]',
      'expected a double-quoted property name, found comment (comments are not allowed in JSON)',
    ],
    ['[{"cmd_id": "a\nb"}]', 'line break inside a string (write \\n)'],
    ['[{"cmd_id": "a"', "expected ',' or '}' after property value, found end of input"],
    ['[{"cmd_id": tru}]', "expected a value, found 'tru'"],
    ['[{"n": 01}]', 'invalid number'],
    ['[1] [2]', "unexpected '[' after the JSON value"],
    ['"just a string"', 'expected a JSON array of commands (or one command object), found a string'],
    ['', 'empty block'],
  ])('reports %j as %s', (json, message) => {
    const r = parseReply(`${COMMANDS_START}${json}${COMMANDS_END}`);
    expect(r.commands).toEqual([]);
    expect(r.errors).toHaveLength(1);
    expect(r.errors[0]).toContain(message);
  });

  it('reports an unterminated block and applies none of it', () => {
    const r = parseReply(`Thinking\n${COMMANDS_START}\n[{"cmd_id":"a","type":"help"}]`);
    expect(r.commands).toEqual([]);
    expect(r.errors).toEqual([
      `commands block 1 (line 2, column 1): missing ${COMMANDS_END} end marker; its content was ignored`,
    ]);
    expect(r.body).toBe('Thinking');
  });

  it('reports a block cut short by the next start marker, and still reads the next block', () => {
    const r = parseReply(
      `${COMMANDS_START}\n[{"cmd_id":"a","type":"help"}\n${block('[{"cmd_id":"b","type":"help"}]')}`,
    );
    expect(r.commands.map((c) => c.cmdId)).toEqual(['b']);
    expect(r.errors[0]).toMatch(/missing COMMANDS>>> end marker before the next <<<COMMANDS/);
  });

  it('reports and removes a stray end marker', () => {
    const r = parseReply(`hello ${COMMANDS_END} world`);
    expect(r.errors).toEqual([`found ${COMMANDS_END} without a matching ${COMMANDS_START}`]);
    expect(r.body).toBe('hello  world');
  });

  it('keeps a "__proto__" key as plain data', () => {
    const r = parseReply(block('[{"cmd_id":"a","type":"diary.add","args":{"__proto__":{"polluted":true}}}]'));
    expect(Object.getPrototypeOf(r.commands[0]!.args)).toBe(Object.prototype);
    expect(Object.keys(r.commands[0]!.args)).toEqual(['__proto__']);
    expect(({} as Record<string, unknown>).polluted).toBeUndefined();
  });
});

describe('confidence tags and line', () => {
  it('extracts [confidence=x]…[/confidence] spans, keeping them in the body', () => {
    const r = parseReply(
      'The sky is [confidence=0.9]blue[/confidence] and [CONFIDENCE = 60%] maybe green [/confidence].',
    );
    expect(r.confidenceTags).toEqual([
      { confidence: 0.9, text: 'blue' },
      { confidence: 0.6, text: 'maybe green' },
    ]);
    expect(r.errors).toEqual([]);
    expect(r.body).toContain('[confidence=0.9]blue[/confidence]');
  });

  it('ignores out-of-range or non-numeric tags with an error, and reports an unclosed tag', () => {
    const r = parseReply(
      '[confidence=1.5]too sure[/confidence] [confidence=high]x[/confidence] [confidence=0.3]ok[/confidence] [confidence=0.2]open',
    );
    expect(r.confidenceTags).toEqual([{ confidence: 0.3, text: 'ok' }]);
    expect(r.errors).toEqual([
      '[confidence=1.5] ignored: confidence must be between 0 and 1',
      '[confidence=high] ignored: confidence must be between 0 and 1',
      'unclosed [confidence=0.2] tag at line 1, column 103 of the body',
    ]);
  });

  it.each([
    ['Confidence: 0.8', 0.8],
    ['confidence: 80%', 0.8],
    ['**Confidence:** 0.75', 0.75],
    ['Confidence: .5 (fairly sure)', 0.5],
    ['Confidence: 1', 1],
    ['Confidence: 0', 0],
  ])('reads %j as %d', (line, value) => {
    const r = parseReply(`Some thought.\n${line}\n`);
    expect(r.confidence).toBe(value);
    expect(r.errors).toEqual([]);
  });

  it.each([
    ['Confidence: 1.2', 'outside 0..1'],
    ['Confidence: 120%', 'outside 0..1'],
    ['Confidence: high', "found 'high'"],
  ])('rejects %j', (line, message) => {
    const r = parseReply(`Thought.\n${line}`);
    expect(r.confidence).toBeNull();
    expect(r.errors[0]).toContain(message);
  });

  it('takes the last valid Confidence line', () => {
    expect(parseReply('Confidence: 0.2\nmore\nConfidence: 0.7').confidence).toBe(0.7);
  });

  it('does not read confidences inside command or facts blocks', () => {
    const r = parseReply(
      `${FACTS_START}\n[{"fact":"x","confidence":0.4}]\n${FACTS_END}\n${block('[{"cmd_id":"a","type":"help","description":"Confidence: 0.1"}]')}`,
    );
    expect(r.confidence).toBeNull();
  });
});

describe('unverified facts', () => {
  it('reads the primary marker form', () => {
    const r = parseReply(
      `Claim.\n${FACTS_START}\n[{"fact":"Water boils at 90C at sea level","confidence":0.3,"source":"memory"},{"fact":"Paris is in France","confidence":0.95}]\n${FACTS_END}\nConfidence: 0.6`,
    );
    expect(r.unverifiedFacts).toEqual([
      { fact: 'Water boils at 90C at sea level', confidence: 0.3, source: 'memory' },
      { fact: 'Paris is in France', confidence: 0.95 },
    ]);
    expect(r.body).toBe('Claim.\n\nConfidence: 0.6');
    expect(r.confidence).toBe(0.6);
  });

  it('reads the secondary `UnverifiedFacts:` form, fenced or not, and removes it from the body', () => {
    const plain = parseReply('Text.\nUnverifiedFacts: [{"fact": "a]b", "confidence": 0.5}]\nAfter.');
    expect(plain.unverifiedFacts).toEqual([{ fact: 'a]b', confidence: 0.5 }]);
    expect(plain.body).toBe('Text.\n\nAfter.');
    const fenced = parseReply(
      'Text.\n**UnverifiedFacts:**\n```json\n[\n  {"fact": "x", "confidence": 0.2}\n]\n```\nAfter.',
    );
    expect(fenced.unverifiedFacts).toEqual([{ fact: 'x', confidence: 0.2 }]);
    expect(fenced.body).toBe('Text.\n\nAfter.');
    expect(fenced.errors).toEqual([]);
  });

  it('reports bad items and keeps the good ones', () => {
    const r = parseReply(
      `${FACTS_START}[{"fact":"","confidence":0.5},{"fact":"x","confidence":2},{"fact":"y","confidence":"0.5"},{"fact":"z","confidence":0.5,"source":3},"w",{"fact":"ok","confidence":0.1}]${FACTS_END}`,
    );
    expect(r.unverifiedFacts).toEqual([{ fact: 'ok', confidence: 0.1 }]);
    expect(r.errors).toEqual([
      'facts block 1 item 1: fact must be a non-empty string',
      'facts block 1 item 2: confidence must be a number between 0 and 1',
      'facts block 1 item 3: confidence must be a number between 0 and 1',
      'facts block 1 item 4: source must be a string',
      'facts block 1 item 5: expected an object {fact, confidence, source?}',
    ]);
  });

  it('reports malformed facts JSON, an unclosed array, a missing array, and an unterminated block', () => {
    expect(parseReply(`${FACTS_START}[{"fact":"x","confidence":0.5},]${FACTS_END}`).errors[0]).toMatch(
      /facts block 1: invalid JSON at line 1, column \d+: trailing comma/,
    );
    expect(parseReply('UnverifiedFacts: [{"fact": "x"').errors[0]).toMatch(/UnverifiedFacts 1 .*not closed/);
    expect(parseReply('UnverifiedFacts: I am not sure').errors[0]).toBe(
      'UnverifiedFacts 1: expected a JSON array after UnverifiedFacts:',
    );
    expect(parseReply('UnverifiedFacts: none').errors).toEqual([]);
    expect(parseReply(`${FACTS_START}[]`).errors[0]).toMatch(/missing UNVERIFIED_FACTS>>> end marker/);
  });

  it('renders facts that parse back', () => {
    const facts = [{ fact: 'a <b> c', confidence: 0.4, source: 'x' }];
    expect(parseReply(renderFactsBlock(facts)).unverifiedFacts).toEqual(facts);
  });
});

describe('hostile input', () => {
  it('parses a megabyte of marker soup in linear time and caps the error list', () => {
    const pieces = [
      COMMANDS_START,
      COMMANDS_END,
      'UnverifiedFacts: [',
      '[confidence=0.5]',
      'Confidence: x\n',
      '[{"cmd_id":"a","type":"help"}]',
      'lorem ',
      '\n',
      FACTS_START,
      '"',
    ];
    let text = '';
    for (let i = 0; text.length < 1_000_000; i++) text += pieces[(i * 7919) % pieces.length];
    const started = performance.now();
    const r = parseReply(text);
    const ms = performance.now() - started;
    // Not a speed target: a quadratic parser takes tens of seconds here.
    expect(ms).toBeLessThan(3000);
    expect(r.errors).toHaveLength(51);
    expect(r.errors[50]).toMatch(/^… and \d+ more problems$/);
  });
});

describe('format instructions', () => {
  it('name every marker, and their example parses', () => {
    for (const m of [COMMANDS_START, COMMANDS_END, FACTS_START, FACTS_END, '[confidence=', 'Confidence:'])
      expect(replyFormatInstructions).toContain(m);
    const r = parseReply(replyFormatInstructions);
    expect(r.commands.map((c) => c.type)).toEqual(['diary.add', 'tasks.list']);
  });
});

// --- properties -----------------------------------------------------------------------------------

/** JSON values as they survive a JSON round trip (no -0). */
const jsonValue = fc.jsonValue().map((v) => JSON.parse(JSON.stringify(v)) as unknown);

const commandArb: fc.Arbitrary<ParsedCommand> = fc.record(
  {
    cmdId: fc.string({ minLength: 1, maxLength: 64 }).filter((s) => s.trim() === s && s.length > 0),
    type: fc
      .tuple(fc.stringMatching(/^[a-z_]{1,12}$/), fc.stringMatching(/^[a-z_]{1,12}$/))
      .map(([f, a]) => `${f}.${a}`),
    args: fc.dictionary(fc.string({ maxLength: 10 }), jsonValue, { maxKeys: 5 }),
    description: fc.string({ maxLength: 40 }),
  },
  { requiredKeys: ['cmdId', 'type', 'args'] },
);

const noMarkers = (s: string) => !/<<<|>>>/.test(s);

describe('properties', () => {
  it('never throws, whatever the string, and keeps its invariants', () => {
    const pieces = fc.oneof(
      fc.string(),
      fc.constantFrom(
        COMMANDS_START,
        COMMANDS_END,
        FACTS_START,
        FACTS_END,
        'UnverifiedFacts:',
        'Confidence: ',
        '[confidence=0.5]',
        '[/confidence]',
        '```json',
        '```',
      ),
      fc.constantFrom('{', '}', '[', ']', '"', ',', ':', '\n', '"cmd_id"', '"type"', '"args"', '0.7', '80%', '\\'),
      jsonValue.map((v) => JSON.stringify(v)),
    );
    fc.assert(
      fc.property(
        fc.array(pieces, { maxLength: 30 }).map((xs) => xs.join('')),
        (text) => {
          const r = parseReply(text);
          expect(typeof r.body).toBe('string');
          expect(new Set(r.commands.map((c) => c.cmdId)).size).toBe(r.commands.length);
          for (const c of r.commands)
            expect(typeof c.args === 'object' && c.args !== null && !Array.isArray(c.args)).toBe(true);
          for (const t of r.confidenceTags) expect(t.confidence >= 0 && t.confidence <= 1).toBe(true);
          for (const f of r.unverifiedFacts) expect(f.confidence >= 0 && f.confidence <= 1).toBe(true);
          if (r.confidence !== null) expect(r.confidence >= 0 && r.confidence <= 1).toBe(true);
        },
      ),
    );
  });

  it('never throws on arbitrary (full unicode) strings', () => {
    fc.assert(
      fc.property(fc.string({ unit: 'binary', maxLength: 300 }), (text) => {
        parseReply(text);
      }),
    );
  });

  it('round trip: renderCommandBlock then parseReply gives the same commands', () => {
    fc.assert(
      fc.property(
        fc.uniqueArray(commandArb, { selector: (c) => c.cmdId, maxLength: 8 }),
        fc.string().filter(noMarkers),
        fc.string().filter(noMarkers),
        (commands, before, after) => {
          const r = parseReply(`${before}\n${renderCommandBlock(commands)}\n${after}`);
          expect(r.commands).toEqual(commands);
          expect(r.rejected).toEqual([]);
          expect(r.errors.filter((e) => e.startsWith('commands block'))).toEqual([]);
        },
      ),
    );
  });
});
