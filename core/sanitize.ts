/**
 * Model text made safe for Postgres and Temporal, once, where it enters (the LLM layer's return
 * path): no NUL or other C0/C1 control character but \t \n \r (Postgres text refuses NUL, jsonb
 * refuses the \u0000 escape), no lone surrogate (jsonb refuses its \udXXX escape; UTF-8 has no
 * encoding for it), and no more than a configured number of UTF-8 bytes. Pure; no Node APIs, so
 * workflow code may import it too.
 */

/** Default cap on one model reply (text and tool calls together), in UTF-8 bytes. */
export const defaultMaxReplyBytes = 256 * 1024;

/** Nesting deeper than this in parsed model JSON is cut (recursion stays bounded on hostile input). */
const maxSanitizedDepth = 64;

// Without the `u` flag the class matches UTF-16 code units, so the surrogate alternatives see halves.
const unsafe =
  /[\u0000-\u0008\u000B\u000C\u000E-\u001F\u0080-\u009F]|[\uD800-\uDBFF](?![\uDC00-\uDFFF])|(?<![\uD800-\uDBFF])[\uDC00-\uDFFF]/g;

/** The text without control characters (but \t \n \r), lone surrogates replaced by U+FFFD. */
export function sanitizeText(text: string): string {
  unsafe.lastIndex = 0;
  if (!unsafe.test(text)) return text;
  unsafe.lastIndex = 0;
  return text.replace(unsafe, (c) => (c.charCodeAt(0) >= 0xd800 ? '\uFFFD' : ''));
}

/** UTF-8 length of a string; a lone surrogate counts 3 bytes (what an encoder writes for it: U+FFFD). */
export function utf8Bytes(text: string): number {
  let n = 0;
  for (let i = 0; i < text.length; i++) {
    const c = text.charCodeAt(i);
    if (c < 0x80) n += 1;
    else if (c < 0x800) n += 2;
    else if (c >= 0xd800 && c <= 0xdbff && i + 1 < text.length && (text.charCodeAt(i + 1) & 0xfc00) === 0xdc00) {
      n += 4;
      i++;
    } else n += 3;
  }
  return n;
}

/** The longest prefix of `text` within `maxBytes` UTF-8 bytes, never splitting a surrogate pair. */
export function truncateUtf8(text: string, maxBytes: number): string {
  if (text.length * 3 <= maxBytes) return text; // fast path: no UTF-16 unit takes more than 3 bytes alone
  let n = 0;
  for (let i = 0; i < text.length; i++) {
    const c = text.charCodeAt(i);
    const pair = c >= 0xd800 && c <= 0xdbff && i + 1 < text.length && (text.charCodeAt(i + 1) & 0xfc00) === 0xdc00;
    const size = c < 0x80 ? 1 : c < 0x800 ? 2 : pair ? 4 : 3;
    if (n + size > maxBytes) return text.slice(0, i);
    n += size;
    if (pair) i++;
  }
  return text;
}

/** Byte size of a value as it travels: its JSON text in UTF-8 (what Temporal's JSON payloads hold). */
export function jsonBytes(value: unknown): number {
  const s = JSON.stringify(value);
  return s === undefined ? 0 : utf8Bytes(s);
}

/** Cut to `max` characters with an ellipsis, never leaving half a surrogate pair. */
export function clipText(text: string, max: number): string {
  if (text.length <= max) return text;
  let end = Math.max(0, max - 1);
  if (end > 0 && (text.charCodeAt(end - 1) & 0xfc00) === 0xd800) end--;
  return `${text.slice(0, end)}…`;
}

/** The text on one line (runs of whitespace as one space), clipped to `max`: a list row, a UI summary. */
export function oneLine(text: string | null | undefined, max = 160): string {
  return clipText((text ?? '').replace(/\s+/g, ' ').trim(), max);
}

/** The last `max` characters of `text`, after a `…` when it was cut: the end of a run's output says why it failed. */
export function tailText(text: string, max: number): string {
  return text.length > max ? `…${text.slice(-max)}` : text;
}

/**
 * A JSON-like value with every string and key sanitised (sanitizeText), recursively; what JSON
 * cannot hold (undefined, functions, NaN…) becomes null, and anything nested deeper than
 * maxSanitizedDepth becomes the string "[nested too deep]". Never throws on plain parsed JSON.
 */
export function sanitizeJson(value: unknown, depth = 0): unknown {
  if (typeof value === 'string') return sanitizeText(value);
  if (value === null || typeof value === 'boolean') return value;
  if (typeof value === 'number') return Number.isFinite(value) ? value : null;
  if (typeof value !== 'object') return null;
  if (depth >= maxSanitizedDepth) return '[nested too deep]';
  if (Array.isArray(value)) return value.map((v) => sanitizeJson(v, depth + 1));
  const out: Record<string, unknown> = {};
  for (const [k, v] of Object.entries(value)) {
    // A key that sanitises to one already present keeps its first value.
    const key = sanitizeText(k);
    // defineProperty, not assignment: a "__proto__" key stays plain data (no prototype change).
    if (!Object.prototype.hasOwnProperty.call(out, key))
      Object.defineProperty(out, key, {
        value: sanitizeJson(v, depth + 1),
        enumerable: true,
        writable: true,
        configurable: true,
      });
  }
  return out;
}

/** A JSON object's sanitised copy (sanitizeJson of an object is an object). */
export function sanitizeJsonObject(value: Record<string, unknown>): Record<string, unknown> {
  return sanitizeJson(value) as Record<string, unknown>;
}

/** A native tool call as the providers report it (the reply parser's ReplyToolCall shape). */
export interface ModelToolCall {
  id?: string;
  name: string;
  args?: Record<string, unknown>;
  rawArgs?: string;
  error?: string;
}

/** One model answer after sanitising, and what was cut to fit the cap. */
interface SanitizedAnswer {
  text: string;
  toolCalls: ModelToolCall[];
  /** Present when the answer was over the cap: its size and what was kept, in UTF-8 bytes. */
  truncated?: { originalBytes: number; keptBytes: number; droppedToolCalls: number };
}

const maxToolNameChars = 200;
const maxToolIdChars = 200;
const maxKeptRawArgsChars = 500;

/**
 * Sanitise one model answer (reply text and native tool calls) and cap it at `maxBytes` UTF-8
 * bytes in all: the text first, then the tool calls in order; a call whose arguments no longer
 * fit keeps its name and an error instead of its arguments (the parser rejects it), and the
 * excess is dropped. Never throws.
 */
export function sanitizeAnswer(
  answer: { text: string; toolCalls?: readonly ModelToolCall[] },
  maxBytes = defaultMaxReplyBytes,
): SanitizedAnswer {
  const rawText = typeof answer.text === 'string' ? answer.text : String(answer.text ?? '');
  const clean = sanitizeText(rawText);
  const text = truncateUtf8(clean, maxBytes);
  let used = utf8Bytes(text);
  let originalBytes = utf8Bytes(clean);
  let cut = text.length < clean.length;
  const toolCalls: ModelToolCall[] = [];
  let dropped = 0;
  for (const call of answer.toolCalls ?? []) {
    const name = clipText(sanitizeText(typeof call.name === 'string' ? call.name : ''), maxToolNameChars);
    const id = typeof call.id === 'string' ? clipText(sanitizeText(call.id), maxToolIdChars) : undefined;
    const head: ModelToolCall = { ...(id !== undefined ? { id } : {}), name };
    const full: ModelToolCall = {
      ...head,
      ...(call.args !== undefined ? { args: sanitizeJsonObject(call.args) } : {}),
      ...(typeof call.rawArgs === 'string' ? { rawArgs: sanitizeText(call.rawArgs) } : {}),
      ...(typeof call.error === 'string' ? { error: clipText(sanitizeText(call.error), 500) } : {}),
    };
    const size = jsonBytes(full);
    originalBytes += size;
    if (used + size <= maxBytes) {
      toolCalls.push(full);
      used += size;
      continue;
    }
    cut = true;
    const stub: ModelToolCall = {
      ...head,
      rawArgs: clipText(full.rawArgs ?? JSON.stringify(full.args ?? {}), maxKeptRawArgsChars),
      error: `arguments of ${size} bytes dropped: a reply is capped at ${maxBytes} bytes`,
    };
    const stubSize = jsonBytes(stub);
    if (used + stubSize <= maxBytes) {
      toolCalls.push(stub);
      used += stubSize;
    } else dropped++;
  }
  return {
    text,
    toolCalls,
    ...(cut ? { truncated: { originalBytes, keptBytes: used, droppedToolCalls: dropped } } : {}),
  };
}
