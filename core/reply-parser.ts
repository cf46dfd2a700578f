/**
 * Turns one LLM reply into commands, confidence tags, unverified facts and an overall
 * confidence. Pure and total: any string gives a ParsedReply, and every
 * problem becomes an `errors` entry or a rejected command, never an exception, so a
 * malformed reply can not wedge the tick.
 */
import type { CommandRejection, ParsedCommand, ParsedReply } from './loop-types.js';
import { capRejections } from './payload-caps.js';
import { sanitizeJsonObject, sanitizeText } from './sanitize.js';
import { parseStrictJson } from './strict-json.js';
import { isPlainObject } from './values.js';

export const COMMANDS_START = '<<<COMMANDS';
export const COMMANDS_END = 'COMMANDS>>>';
export const FACTS_START = '<<<UNVERIFIED_FACTS';
export const FACTS_END = 'UNVERIFIED_FACTS>>>';
/** The secondary form of the facts block: this label, then a JSON array. */
const FACTS_LABEL = 'UnverifiedFacts:';

export const maxCommandsPerReply = 50;
const maxCmdIdLength = 64;
const maxFactsPerReply = 50;
const maxRawLength = 500;

/** The reply format, as the system prompt states it to the agent. */
export const replyFormatInstructions = `Reply format:
1. Write your thoughts as plain text.
2. To act, add a command block: a JSON array between a line ${COMMANDS_START} and a line ${COMMANDS_END}.
   Each command is {"cmd_id": "...", "type": "family.action", "args": {...}, "description": "why"}:
   cmd_id is unique within this reply (c1, c2, ...); type comes from the command catalogue; args is a JSON object.
   Strict JSON: double quotes, no trailing commas, no comments. Example:
${COMMANDS_START}
[
  {"cmd_id": "c1", "type": "diary.add", "args": {"title": "First note", "content": "What I learned."}, "description": "remember it"},
  {"cmd_id": "c2", "type": "tasks.list", "args": {}}
]
${COMMANDS_END}
   Results of your commands appear in your next context.
3. Mark statements you are unsure of: [confidence=0.6]the statement[/confidence] (0 to 1).
4. List claims you could not verify (confidence below 0.7 becomes a fact-check task):
${FACTS_START}
[{"fact": "...", "confidence": 0.5, "source": "where it came from"}]
${FACTS_END}
5. End with one line rating your whole reply: Confidence: 0.8 (0 to 1).`;

const emptyReply = (): ParsedReply => ({
  body: '',
  commands: [],
  rejected: [],
  confidenceTags: [],
  unverifiedFacts: [],
  confidence: null,
  errors: [],
});

/** Parse one LLM reply. Never throws. */
export function parseReply(text: string): ParsedReply {
  let input: string;
  try {
    input = typeof text === 'string' ? text : String(text);
  } catch {
    return { ...emptyReply(), errors: ['reply is not a string'] };
  }
  try {
    return parse(input);
  } catch (err) {
    // Defence in depth: parse() is meant to be total; if it is not, the tick still goes on.
    return { ...emptyReply(), body: input.trim(), errors: [`parser failure: ${errorMessage(err)}`] };
  }
}

/**
 * A tick's valid commands and the ones the catalogue refused, back in the reply's order: each
 * refused one goes before the valid command at its `at` (the count of valid ones before it).
 */
export function inReplyOrder<C, I extends { at: number }>(
  commands: readonly C[],
  invalid: readonly I[] = [],
): Array<{ command: C; invalid?: undefined } | { command?: undefined; invalid: I }> {
  const out: Array<{ command: C; invalid?: undefined } | { command?: undefined; invalid: I }> = [];
  let j = 0;
  commands.forEach((command, k) => {
    while (j < invalid.length && invalid[j]!.at <= k) out.push({ invalid: invalid[j++]! });
    out.push({ command });
  });
  while (j < invalid.length) out.push({ invalid: invalid[j++]! });
  return out;
}

/**
 * Render commands as a block that parseReply reads back unchanged. `<` and `>` inside JSON
 * strings are written as \u003c / \u003e so no argument text can close the block early.
 */
export function renderCommandBlock(commands: readonly ParsedCommand[]): string {
  const items = commands.map((c) => {
    const item: Record<string, unknown> = { cmd_id: c.cmdId, type: c.type, args: c.args };
    if (c.description !== undefined) item.description = c.description;
    return '  ' + safeJson(item);
  });
  return `${COMMANDS_START}\n[\n${items.join(',\n')}\n]\n${COMMANDS_END}`;
}

/** Render unverified facts in the primary (marker) form. */
export function renderFactsBlock(facts: ParsedReply['unverifiedFacts']): string {
  return `${FACTS_START}\n${safeJson(facts)}\n${FACTS_END}`;
}

function safeJson(value: unknown): string {
  return JSON.stringify(value).replace(/[<>]/g, (c) => (c === '<' ? '\\u003c' : '\\u003e'));
}

// ---------------------------------------------------------------------------------------

interface State {
  text: string;
  locate: (offset: number) => string;
  suppressedErrors: number;
  out: ParsedReply;
  seenIds: Set<string>;
  commandBlocks: number;
  factBlocks: number;
  /** Commands past maxCommandsPerReply: counted, and reported as one rejection. */
  overflow: number;
}

function parse(text: string): ParsedReply {
  const st: State = {
    text,
    locate: locator(text),
    suppressedErrors: 0,
    out: emptyReply(),
    seenIds: new Set(),
    commandBlocks: 0,
    factBlocks: 0,
    overflow: 0,
  };
  const body = extractMarkerBlocks(st);
  const withoutFacts = extractLabelledFacts(st, body);
  extractConfidenceTags(st, withoutFacts);
  extractConfidenceLine(st, withoutFacts);
  st.out.body = withoutFacts.trim();
  if (st.overflow) st.out.rejected.push(overflowRejection(st.overflow));
  st.out.rejected = capRejections(st.out.rejected);
  if (st.suppressedErrors) st.out.errors.push(`… and ${st.suppressedErrors} more problems`);
  return st.out;
}

const blockKinds = [
  { kind: 'commands', start: COMMANDS_START, end: COMMANDS_END },
  { kind: 'facts', start: FACTS_START, end: FACTS_END },
] as const;

/** Cut every marker block out of the text; returns what is left (the body). */
function extractMarkerBlocks(st: State): string {
  const { text } = st;
  const find = Object.fromEntries(blockKinds.flatMap((k) => [k.start, k.end]).map((m) => [m, finder(text, m)]));
  const nextStart = (from: number) => {
    let best: { index: number; kind: (typeof blockKinds)[number] } | null = null;
    for (const kind of blockKinds) {
      const i = find[kind.start]!(from);
      if (i !== -1 && (!best || i < best.index)) best = { index: i, kind };
    }
    return best;
  };
  const segments: string[] = [];
  let pos = 0;
  while (pos <= text.length) {
    const next = nextStart(pos);
    if (!next) {
      segments.push(stripStrayEnds(st, text.slice(pos)));
      break;
    }
    segments.push(stripStrayEnds(st, text.slice(pos, next.index)));
    const contentStart = next.index + next.kind.start.length;
    const end = find[next.kind.end]!(contentStart);
    const following = nextStart(contentStart);
    const n = next.kind.kind === 'commands' ? ++st.commandBlocks : ++st.factBlocks;
    const label = next.kind.kind === 'commands' ? `commands block ${n}` : `facts block ${n}`;
    const cutShort = following !== null && (end === -1 || following.index < end);
    if (end === -1 || cutShort) {
      // An unterminated block may be a reply cut off mid-command: none of it is applied.
      const before = cutShort ? ` before the next ${following.kind.start}` : '';
      addError(
        st,
        `${label} (${st.locate(next.index)}): missing ${next.kind.end} end marker${before}; its content was ignored`,
      );
      pos = following ? following.index : text.length + 1;
      continue;
    }
    const content = text.slice(contentStart, end);
    if (next.kind.kind === 'commands') parseCommandBlock(st, content, contentStart, label);
    else parseFactsJson(st, content, contentStart, label);
    pos = end + next.kind.end.length;
    // A block the model wrapped in a code fence: drop the fence that is left empty.
    const open = /```[A-Za-z0-9_-]*[ \t]*\r?\n?[ \t]*$/.exec(segments[segments.length - 1]!);
    const close = /^[ \t]*\r?\n?[ \t]*```/.exec(text.slice(pos, pos + 64));
    if (open && close) {
      segments[segments.length - 1] = segments[segments.length - 1]!.slice(0, open.index);
      pos += close[0].length;
    }
  }
  return segments.join('');
}

/**
 * `indexOf(needle, from)` for non-decreasing-ish `from`, remembering the last answer: a marker
 * that never occurs is searched for once, not once per block (linear time on long replies).
 */
function finder(text: string, needle: string): (from: number) => number {
  let cachedFrom = -1;
  let cachedAt = -1;
  return (from) => {
    if (cachedFrom !== -1 && from >= cachedFrom && (cachedAt === -1 || from <= cachedAt)) return cachedAt;
    cachedFrom = from;
    cachedAt = text.indexOf(needle, from);
    return cachedAt;
  };
}

/** An end marker with no start marker before it: removed from the body and reported. */
function stripStrayEnds(st: State, segment: string): string {
  let s = segment;
  for (const kind of blockKinds) {
    if (s.includes(kind.end)) {
      addError(st, `found ${kind.end} without a matching ${kind.start}`);
      s = s.split(kind.end).join('');
    }
  }
  return s;
}

/** `line L, column C` of offsets in one text; line starts are indexed once (long replies, many errors). */
function locator(text: string): (offset: number) => string {
  let starts: number[] | null = null;
  return (offset) => {
    if (!starts) {
      starts = [0];
      for (let i = text.indexOf('\n'); i !== -1; i = text.indexOf('\n', i + 1)) starts.push(i + 1);
    }
    let lo = 0;
    let hi = starts.length - 1;
    while (lo < hi) {
      const mid = (lo + hi + 1) >> 1;
      if (starts[mid]! <= offset) lo = mid;
      else hi = mid - 1;
    }
    return `line ${lo + 1}, column ${offset - starts[lo]! + 1}`;
  };
}

const maxErrors = 50;

/** Record a problem; past `maxErrors` only count them (a garbage reply must not yield a huge list). */
function addError(st: State, message: string): void {
  if (st.out.errors.length < maxErrors) st.out.errors.push(message);
  else st.suppressedErrors++;
}

/** The JSON inside a block, minus an optional ```json fence; with its offset in the reply. */
function unfence(content: string, offset: number): { json: string; offset: number } {
  let start = 0;
  let end = content.length;
  const lead = /^\s*```[A-Za-z0-9_-]*[ \t]*\r?\n?/.exec(content);
  if (lead) start = lead[0].length;
  const trail = /```\s*$/.exec(content.slice(start));
  if (lead && trail) end = start + trail.index;
  return { json: content.slice(start, end), offset: offset + start };
}

function parseBlockJson(
  st: State,
  content: string,
  contentOffset: number,
  label: string,
): { ok: true; value: unknown } | { ok: false } {
  const { json, offset } = unfence(content, contentOffset);
  if (json.trim() === '') {
    addError(st, `${label}: empty block`);
    return { ok: false };
  }
  const parsed = parseStrictJson(json);
  if (!parsed.ok) {
    addError(st, `${label}: invalid JSON at ${st.locate(offset + parsed.offset)}: ${parsed.message}`);
    return { ok: false };
  }
  return parsed;
}

function parseCommandBlock(st: State, content: string, contentOffset: number, label: string): void {
  const parsed = parseBlockJson(st, content, contentOffset, label);
  if (!parsed.ok) return;
  let items: unknown[];
  const v = parsed.value;
  if (Array.isArray(v)) items = v;
  else if (isPlainObject(v) && Array.isArray(v.commands) && v.type === undefined) items = v.commands;
  else if (isPlainObject(v)) items = [v];
  else {
    addError(st, `${label}: expected a JSON array of commands (or one command object), found ${jsonKind(v)}`);
    return;
  }
  items.forEach((item, i) => {
    const result = toCommand(st, item);
    if (result === overflowMark) st.overflow++;
    else if ('reason' in result)
      st.out.rejected.push({ ...result, reason: `${label} item ${i + 1}: ${result.reason}` });
    else st.out.commands.push(result);
  });
  // A block appendToolCalls recorded also carries the tool calls that were malformed: a reply
  // re-read later (a retried tick) gets the same rejections as when it was first parsed.
  if (isPlainObject(v) && v.source === nativeToolCallsSource && Array.isArray(v.rejected)) {
    // Bounded like any list from the model: a hand-written block could claim any number.
    for (const r of v.rejected.slice(0, maxCommandsPerReply)) {
      if (!isPlainObject(r) || typeof r.reason !== 'string') continue;
      st.out.rejected.push({
        ...(typeof r.cmd_id === 'string' ? { cmdId: sanitizeText(r.cmd_id) } : {}),
        ...(typeof r.type === 'string' ? { type: sanitizeText(r.type) } : {}),
        raw: typeof r.raw === 'string' ? sanitizeText(r.raw) : '',
        reason: sanitizeText(r.reason),
      });
    }
  }
}

/** toCommand's answer for a command past maxCommandsPerReply (counted, not listed one by one). */
const overflowMark = Symbol('overflow');

const overflowRejection = (n: number): CommandRejection => ({
  raw: '',
  reason: `${n} more ${n === 1 ? 'command' : 'commands'} dropped: at most ${maxCommandsPerReply} commands in one reply`,
});

/**
 * One block item as a command, or why not. JSON escapes (`\u0000`, a lone `\ud800`) turn into
 * characters only here, after the reply text was sanitised: every string of the command is
 * sanitised again, keys included, so jsonb never sees them.
 */
function toCommand(st: State, item: unknown): ParsedCommand | CommandRejection | typeof overflowMark {
  const raw = truncate(safeStringify(item), maxRawLength);
  if (!isPlainObject(item))
    return { raw, reason: `a command must be a JSON object with cmd_id, type and args, found ${jsonKind(item)}` };
  const rawId = item.cmd_id !== undefined ? item.cmd_id : item.cmdId;
  const typeRaw = item.type;
  const type = typeof typeRaw === 'string' ? normalizeType(sanitizeText(typeRaw)) : undefined;
  const reject = (reason: string, cmdId?: string): CommandRejection => ({
    ...(cmdId !== undefined ? { cmdId } : {}),
    ...(type ? { type } : {}),
    raw,
    reason,
  });

  let cmdId: string;
  if (rawId === undefined || rawId === null || (typeof rawId === 'string' && rawId.trim() === ''))
    return reject('missing cmd_id');
  if (typeof rawId === 'string') cmdId = sanitizeText(rawId).trim();
  else if (typeof rawId === 'number' && Number.isFinite(rawId)) cmdId = String(rawId);
  else return reject(`cmd_id must be a string, found ${jsonKind(rawId)}`);
  if (cmdId.length > maxCmdIdLength) return reject(`cmd_id longer than ${maxCmdIdLength} characters`);

  if (typeRaw === undefined || typeRaw === null || type === '') return reject('missing type', cmdId);
  if (typeof typeRaw !== 'string')
    return reject(`type must be a string such as "diary.add", found ${jsonKind(typeRaw)}`, cmdId);

  let args: Record<string, unknown> = {};
  if (item.args !== undefined && item.args !== null) {
    if (!isPlainObject(item.args)) return reject(`args must be a JSON object, found ${jsonKind(item.args)}`, cmdId);
    args = sanitizeJsonObject(item.args);
  }
  const d = item.description;
  if (d !== undefined && d !== null && typeof d !== 'string')
    return reject(`description must be a string, found ${jsonKind(d)}`, cmdId);

  if (st.seenIds.has(cmdId)) return reject(`duplicate cmd_id '${cmdId}' in this reply`, cmdId);
  if (st.out.commands.length >= maxCommandsPerReply) return overflowMark;
  st.seenIds.add(cmdId);
  const cmd: ParsedCommand = { cmdId, type: type!, args };
  if (typeof d === 'string') cmd.description = sanitizeText(d);
  return cmd;
}

/** `Diary Add`, `diary/add`, `diary:add` → `diary.add`. */
function normalizeType(type: string): string {
  return type
    .trim()
    .toLowerCase()
    .replace(/[\s/:]+/g, '.');
}

// --- unverified facts ----------------------------------------------------------------------

function parseFactsJson(st: State, content: string, contentOffset: number, label: string): void {
  const parsed = parseBlockJson(st, content, contentOffset, label);
  if (parsed.ok) addFacts(st, parsed.value, label);
}

function addFacts(st: State, value: unknown, label: string): void {
  const items = Array.isArray(value) ? value : isPlainObject(value) ? [value] : null;
  if (!items) {
    addError(st, `${label}: expected a JSON array of {fact, confidence, source?}, found ${jsonKind(value)}`);
    return;
  }
  items.forEach((item, i) => {
    const where = `${label} item ${i + 1}`;
    if (!isPlainObject(item)) return void addError(st, `${where}: expected an object {fact, confidence, source?}`);
    const { fact, confidence, source } = item;
    if (typeof fact !== 'string' || fact.trim() === '')
      return void addError(st, `${where}: fact must be a non-empty string`);
    if (typeof confidence !== 'number' || !(confidence >= 0 && confidence <= 1))
      return void addError(st, `${where}: confidence must be a number between 0 and 1`);
    if (source !== undefined && source !== null && typeof source !== 'string')
      return void addError(st, `${where}: source must be a string`);
    if (st.out.unverifiedFacts.length >= maxFactsPerReply)
      return void addError(st, `${where}: more than ${maxFactsPerReply} unverified facts in one reply; ignored`);
    st.out.unverifiedFacts.push({
      fact: sanitizeText(fact).trim(),
      confidence,
      ...(typeof source === 'string' ? { source: sanitizeText(source) } : {}),
    });
  });
}

/** The secondary facts form: `UnverifiedFacts:` then a JSON array. Returns the body without it. */
function extractLabelledFacts(st: State, body: string): string {
  const labelRe = /^[ \t>*_#-]*unverified[ _]?facts[ \t*_]*:[ \t*_]*/gim;
  const locate = locator(body);
  let out = '';
  let pos = 0;
  let n = 0;
  for (let m = labelRe.exec(body); m; m = labelRe.exec(body)) {
    if (m.index < pos) continue;
    // Each unclosed array is scanned to the end of the body: bound the work on hostile input.
    if (++n > 20) break;
    const label = `UnverifiedFacts ${n}`;
    let i = m.index + m[0].length;
    const fence = /^\s*```[A-Za-z0-9_-]*[ \t]*\r?\n/.exec(body.slice(i));
    if (fence) i += fence[0].length;
    while (i < body.length && /\s/.test(body[i]!)) i++;
    if (body[i] !== '[' && body[i] !== '{') {
      const rest = body.slice(i, i + 20).split('\n')[0] ?? '';
      if (!/^(none|n\/a|-)?\s*$/i.test(rest)) addError(st, `${label}: expected a JSON array after ${FACTS_LABEL}`);
      continue;
    }
    const end = matchingBracket(body, i);
    if (end === -1) {
      addError(st, `${label} (${locate(i)}): the JSON array is not closed`);
      continue;
    }
    const json = body.slice(i, end + 1);
    const parsed = parseStrictJson(json);
    if (!parsed.ok)
      addError(st, `${label}: invalid JSON at ${locate(i + parsed.offset)} of the body: ${parsed.message}`);
    else addFacts(st, parsed.value, label);
    let cut = end + 1;
    const closing = /^[ \t]*\r?\n?[ \t]*```/.exec(body.slice(cut));
    if (fence && closing) cut += closing[0].length;
    out += body.slice(pos, m.index);
    pos = cut;
    labelRe.lastIndex = cut;
  }
  return out + body.slice(pos);
}

/** Index of the bracket closing the one at `open`, skipping JSON strings; -1 if none. */
function matchingBracket(s: string, open: number): number {
  let depth = 0;
  let inString = false;
  for (let i = open; i < s.length; i++) {
    const c = s[i];
    if (inString) {
      if (c === '\\') i++;
      else if (c === '"') inString = false;
      continue;
    }
    if (c === '"') inString = true;
    else if (c === '[' || c === '{') depth++;
    else if (c === ']' || c === '}') {
      depth--;
      if (depth === 0) return i;
    }
  }
  return -1;
}

// --- confidence ----------------------------------------------------------------------------

/**
 * `0.6`, `.6`, `60%` → 0.6; null when not a number. Range is checked by the caller. With
 * `trailing`, words after the number are allowed (`Confidence: 0.8 (fairly sure)`).
 */
function parseConfidenceValue(raw: string, trailing = false): number | null {
  const re = trailing
    ? /^([+-]?(?:\d+(?:\.\d*)?|\.\d+))\s*(%?)(?![\d.])(?:\s.*|[(,;].*)?$/
    : /^([+-]?(?:\d+(?:\.\d*)?|\.\d+))\s*(%?)$/;
  const m = re.exec(raw.trim());
  if (!m) return null;
  const n = Number(m[1]);
  return m[2] ? n / 100 : n;
}

function extractConfidenceTags(st: State, body: string): void {
  const openRe = /\[confidence\s*=\s*([^\]\n]{0,40})\]/gi;
  const locate = locator(body);
  const lower = body.toLowerCase();
  const close = '[/confidence]';
  for (let m = openRe.exec(body); m; m = openRe.exec(body)) {
    const end = lower.indexOf(close, m.index + m[0].length);
    if (end === -1) {
      addError(st, `unclosed [confidence=${m[1]}] tag at ${locate(m.index)} of the body`);
      break; // no later tag can be closed either
    }
    const value = parseConfidenceValue(m[1] ?? '');
    const text = body.slice(m.index + m[0].length, end).trim();
    if (value === null || !(value >= 0 && value <= 1)) {
      addError(st, `[confidence=${m[1]}] ignored: confidence must be between 0 and 1`);
    } else {
      st.out.confidenceTags.push({ confidence: value, text });
    }
    openRe.lastIndex = end + close.length;
  }
}

function extractConfidenceLine(st: State, body: string): void {
  const lineRe = /^[ \t>*_-]*confidence[ \t*_]*:[ \t*_]*(.*)$/gim;
  for (let m = lineRe.exec(body); m; m = lineRe.exec(body)) {
    const raw = (m[1] ?? '').replace(/[ \t*_.\r]+$/, '');
    const value = parseConfidenceValue(raw, true);
    if (value === null)
      addError(
        st,
        `Confidence line ignored: expected a number between 0 and 1 or a percentage, found '${truncate(raw, 40)}'`,
      );
    else if (!(value >= 0 && value <= 1)) addError(st, `Confidence line ignored: ${raw} is outside 0..1`);
    else st.out.confidence = value; // the last valid line wins
  }
}

// --- helpers --------------------------------------------------------------------------------

function jsonKind(v: unknown): string {
  if (v === null) return 'null';
  if (Array.isArray(v)) return 'an array';
  if (typeof v === 'object') return 'an object';
  return `a ${typeof v}`;
}

function safeStringify(v: unknown): string {
  try {
    return JSON.stringify(v) ?? String(v);
  } catch {
    return String(v);
  }
}

function truncate(s: string, max: number): string {
  return s.length <= max ? s : `${s.slice(0, max - 1)}…`;
}

function errorMessage(err: unknown): string {
  return err instanceof Error ? err.message : String(err);
}

// --- native tool calls ------------------------------------------------------------------------

/**
 * A provider with native tool calling (OpenAI-compatible, Anthropic) answers with tool calls
 * beside the text. appendToolCalls records them in the reply text as one more command block,
 * `{"source": "native_tool_calls", "commands": [...], "rejected": [...]}`, so that:
 *  - parseReply reads their `tool.call` and `tools.mcp` commands and leaves the block out of the body
 *    (everything that reads a stored reply sees an ordinary command block);
 *  - it also restores the rejections (malformed arguments), so a retried tick that re-parses
 *    the recorded text gets exactly the same commands and rejections.
 */
const nativeToolCallsSource = 'native_tool_calls';

/** One native tool call: parsed `args`, or the raw text and the `error` when they did not parse. */
export interface ReplyToolCall {
  id?: string;
  name: string;
  args?: Record<string, unknown>;
  rawArgs?: string;
  error?: string;
}

/** The reply text with its native tool calls appended as a command block (see above). Never throws. */
export function appendToolCalls(text: string, calls: readonly ReplyToolCall[]): string {
  if (calls.length === 0) return text;
  const before = parseReply(text);
  const { commands, rejected } = toolCallsToCommands(calls, {
    taken: new Set([
      ...before.commands.map((c) => c.cmdId),
      ...before.rejected.flatMap((r) => (r.cmdId ? [r.cmdId] : [])),
    ]),
    room: maxCommandsPerReply - before.commands.length,
  });
  const items = commands.map((c) => '  ' + safeJson({ cmd_id: c.cmdId, type: c.type, args: c.args }));
  const rejections = rejected.map(
    (r) => '  ' + safeJson({ cmd_id: r.cmdId, type: r.type, raw: r.raw, reason: r.reason }),
  );
  const block = `{"source": "${nativeToolCallsSource}", "commands": [\n${items.join(',\n')}\n], "rejected": [\n${rejections.join(',\n')}\n]}`;
  return `${text}\n${COMMANDS_START}\n${block}\n${COMMANDS_END}`;
}

/** A tool call id as a cmd_id: letters, digits, `_`, `-`, `.` only, at most maxCmdIdLength. */
function toolCallCmdId(id: string | undefined, index: number): string {
  const clean = (id ?? '')
    .replace(/[^A-Za-z0-9_.-]+/g, '_')
    .replace(/^[_.-]+|[_.-]+$/g, '')
    .slice(0, maxCmdIdLength);
  return clean || `tool${index + 1}`;
}

/** The name prefix of an MCP tool bound natively: `mcp__<server>__<tool>`. */
export const mcpNativeToolPrefix = 'mcp__';

const nativeToolName = /^[a-zA-Z0-9_-]{1,64}$/;

/** The MCP server and tool a native tool name stands for; null unless it is `mcp__<server>__<tool>`. */
export function parseMcpNativeToolName(name: string): { server: string; tool: string } | null {
  if (!name.startsWith(mcpNativeToolPrefix) || !nativeToolName.test(name)) return null;
  const rest = name.slice(mcpNativeToolPrefix.length);
  const at = rest.indexOf('__');
  if (at <= 0 || at + 2 >= rest.length) return null;
  return { server: rest.slice(0, at), tool: rest.slice(at + 2) };
}

/**
 * The native tool name of an MCP tool, or null when none fits: the name must be a valid tool name
 * and read back as the same server and tool (a server name holding `__` or ending in `_` does not).
 */
export function mcpNativeToolName(server: string, tool: string): string | null {
  const name = `${mcpNativeToolPrefix}${server}__${tool}`;
  const back = parseMcpNativeToolName(name);
  return back && back.server === server && back.tool === tool ? name : null;
}

/**
 * Native tool calls as commands. A call of `mcp__<server>__<tool>` is a `tools.mcp` command
 * ({server, tool, args}: the call's arguments are the tool's input); any other is a `tool.call`
 * ({tool, action, args?}; arguments are the bound tool's schema {action, args?}, other top-level
 * keys are folded into args). A call whose name or arguments are malformed becomes a rejection
 * with the reason. cmd_ids come from the call ids, made unique against `taken` (the text's own
 * commands).
 */
export function toolCallsToCommands(
  calls: readonly ReplyToolCall[],
  opts: { taken?: ReadonlySet<string>; room?: number } = {},
): { commands: ParsedCommand[]; rejected: CommandRejection[] } {
  const taken = new Set(opts.taken ?? []);
  const room = opts.room ?? maxCommandsPerReply;
  const commands: ParsedCommand[] = [];
  const rejected: CommandRejection[] = [];
  let overflow = 0;
  calls.forEach((call, i) => {
    let cmdId = toolCallCmdId(call.id, i);
    for (let n = 2; taken.has(cmdId); n++)
      cmdId = `${toolCallCmdId(call.id, i).slice(0, maxCmdIdLength - String(n).length - 1)}-${n}`;
    taken.add(cmdId);
    const name = typeof call.name === 'string' ? call.name : '';
    const label = `tool call ${call.id ?? i + 1}${name ? ` (${name})` : ''}`;
    const raw = truncate(call.rawArgs ?? safeStringify(call.args ?? {}), maxRawLength);
    const mcp = name.startsWith(mcpNativeToolPrefix);
    const reject = (reason: string) =>
      rejected.push({ cmdId, type: mcp ? 'tools.mcp' : 'tool.call', raw, reason: `${label}: ${reason}` });
    if (!name) return reject('no tool name');
    if (mcp) {
      const target = parseMcpNativeToolName(name);
      if (!target) return reject(`not an MCP tool name: expected ${mcpNativeToolPrefix}<server>__<tool>`);
      if (call.error !== undefined || !isPlainObject(call.args))
        return reject(`malformed arguments (${call.error ?? 'not a JSON object'}); expected the tool's input object`);
      if (commands.length >= room) return void overflow++;
      commands.push({ cmdId, type: 'tools.mcp', args: { server: target.server, tool: target.tool, args: call.args } });
      return;
    }
    if (call.error !== undefined || !isPlainObject(call.args))
      return reject(
        `malformed arguments (${call.error ?? 'not a JSON object'}); expected {"action": "...", "args": {...}}`,
      );
    const { action, args, ...rest } = call.args;
    if (typeof action !== 'string' || action.trim() === '')
      return reject('the arguments need "action": one of the valid actions the tool description lists');
    if (args !== undefined && args !== null && !isPlainObject(args))
      return reject(`"args" must be a JSON object, found ${jsonKind(args)}`);
    if (commands.length >= room) return void overflow++;
    const merged =
      Object.keys(rest).length > 0
        ? { ...rest, ...(isPlainObject(args) ? args : {}) }
        : isPlainObject(args)
          ? args
          : undefined;
    commands.push({
      cmdId,
      type: 'tool.call',
      args: { tool: name, action: action.trim(), ...(merged ? { args: merged } : {}) },
    });
  });
  if (overflow) rejected.push(overflowRejection(overflow));
  return { commands, rejected: capRejections(rejected) };
}
