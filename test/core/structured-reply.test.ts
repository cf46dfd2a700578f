import { describe, expect, it } from 'vitest';
import { parseReply } from '../../core/reply-parser.js';
import { structuredReplySchema, structuredReplyToText } from '../../core/structured-reply.js';

describe('structured (JSON) replies of grammar-constrained models', () => {
  it('become the canonical text the parser reads', () => {
    const text = structuredReplyToText(
      JSON.stringify({
        thought: 'I should note this.',
        commands: [
          { cmd_id: 'a', type: 'diary.add', args: { title: 't', content: 'c' } },
          { type: 'help', args: {} },
        ],
      }),
    );
    const parsed = parseReply(text!);
    expect(parsed.body).toBe('I should note this.');
    expect(parsed.commands).toEqual([
      { cmdId: 'a', type: 'diary.add', args: { title: 't', content: 'c' } },
      { cmdId: 'c2', type: 'help', args: {} },
    ]);
    expect(parsed.errors).toEqual([]);
  });

  it('a thought without commands is plain text; anything else is left to the parser', () => {
    expect(structuredReplyToText('{"thought":" just thinking ","commands":[]}')).toBe('just thinking');
    expect(structuredReplyToText('not json')).toBeNull();
    expect(structuredReplyToText('{"commands":[]}')).toBeNull();
  });

  it('the grammar offers exactly the catalogue’s command types', () => {
    const types = structuredReplySchema.properties.commands.items.properties.type.enum;
    expect(types).toContain('diary.add');
    expect(types).toContain('notes.send');
    expect(types).toContain('shell');
    expect(types).not.toContain('teleport.now');
  });
});
