/**
 * The exact prompt of a main-loop tick as it is stored (`tick_prompts`), so that a person can read
 * what the model was given. Bounded twice: each row keeps at most `maxBytes` of message text, and
 * an agent keeps the rows of its last `keptTicks` ticks. Pure; workflow code may import it too.
 */
import { sanitizeText, truncateUtf8, utf8Bytes } from './sanitize.js';

export const tickPromptLimits = {
  /** UTF-8 bytes of message text one tick's row keeps, all messages together. */
  maxBytes: 64 * 1024,
  /** Ticks an agent keeps prompts for (the newest); older rows go as new ones are written. */
  keptTicks: 200,
} as const;

export interface StoredPromptMessage {
  role: 'system' | 'user' | 'assistant';
  /** The text sent, or its beginning when the row's cap cut it (`chars` is then its full length). */
  content: string;
  /** Set only when `content` was cut: the length of the whole text sent, in characters. */
  chars?: number;
}

export interface StoredPrompt {
  messages: StoredPromptMessage[];
  /** Characters of the whole prompt as sent, all messages, before any cut. */
  chars: number;
}

/**
 * The prompt as it is stored: every message, each text whole when they all fit in `maxBytes`.
 * When they do not, the room is shared fairly: a message shorter than its share keeps all its
 * text and leaves the rest to the others, a longer one keeps its beginning. Text is stored as
 * sent, but for the characters Postgres cannot hold (NUL and other control characters, lone
 * surrogates: see sanitizeText), which never reach a context built from stored rows anyway.
 */
export function promptForRecord(
  messages: ReadonlyArray<{ role: StoredPromptMessage['role']; content: string }>,
  maxBytes: number = tickPromptLimits.maxBytes,
): StoredPrompt {
  const texts = messages.map((m) => sanitizeText(m.content));
  const bytes = texts.map(utf8Bytes);
  const chars = messages.reduce((n, m) => n + m.content.length, 0);
  const total = bytes.reduce((a, b) => a + b, 0);
  const room = total <= maxBytes ? bytes : fairShares(bytes, maxBytes);
  return {
    messages: messages.map((m, i) => {
      const whole = room[i]! >= bytes[i]!;
      return whole
        ? { role: m.role, content: texts[i]! }
        : { role: m.role, content: truncateUtf8(texts[i]!, room[i]!), chars: m.content.length };
    }),
    chars,
  };
}

/** Bytes each message may keep: the smallest first take what they need up to an equal share of what is left. */
function fairShares(bytes: readonly number[], maxBytes: number): number[] {
  const room = bytes.map(() => 0);
  const order = bytes.map((_, i) => i).sort((a, b) => bytes[a]! - bytes[b]!);
  let left = maxBytes;
  order.forEach((i, k) => {
    const share = Math.floor(left / (order.length - k));
    room[i] = Math.min(bytes[i]!, share);
    left -= room[i]!;
  });
  return room;
}
