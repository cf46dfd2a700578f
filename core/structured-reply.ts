/**
 * The JSON form of a reply, for models that follow a grammar better than a text format (the
 * small local model): the LLM layer constrains generation to `structuredReplySchema`, and
 * `structuredReplyToText` turns the JSON back into the canonical text the parser reads, so
 * both paths share one parser, one validator and one record.
 */
import { commandTypes } from './catalogue.js';
import { renderCommandBlock } from './reply-parser.js';
import type { ParsedCommand } from './loop-types.js';
import { isPlainObject } from './values.js';

export const structuredReplySchema = {
  type: 'object',
  properties: {
    // Bounded: a small model on the CPU generates ~25–50 tokens/s, and left free it writes a
    // thought of ~200 tokens every tick (most of the tick's time).
    thought: { type: 'string', description: 'a short thought, at most 300 characters', maxLength: 300 },
    commands: {
      type: 'array',
      maxItems: 3,
      items: {
        type: 'object',
        properties: {
          cmd_id: { type: 'string' },
          type: { type: 'string', enum: [...commandTypes] },
          args: { type: 'object' },
        },
        required: ['cmd_id', 'type', 'args'],
      },
    },
  },
  required: ['thought', 'commands'],
} as const;

/** Canonical reply text from the JSON form; `null` when `raw` is not that JSON (the parser then reports it). */
export function structuredReplyToText(raw: string): string | null {
  let value: unknown;
  try {
    value = JSON.parse(raw);
  } catch {
    return null;
  }
  if (!value || typeof value !== 'object' || typeof (value as { thought?: unknown }).thought !== 'string') return null;
  const { thought, commands } = value as { thought: string; commands?: unknown };
  const list: ParsedCommand[] = Array.isArray(commands)
    ? commands.flatMap((c: unknown, i) => {
        if (!c || typeof c !== 'object') return [];
        const o = c as Record<string, unknown>;
        return [
          {
            cmdId: typeof o.cmd_id === 'string' && o.cmd_id ? o.cmd_id : `c${i + 1}`,
            type: String(o.type ?? ''),
            args: isPlainObject(o.args) ? o.args : {},
          },
        ];
      })
    : [];
  return list.length ? `${thought.trim()}\n${renderCommandBlock(list)}` : thought.trim();
}
