/**
 * Caps on everything derived from a model reply that rides through workflow history (think's
 * result, applyCommands' input): per list, per item, and in total. Temporal refuses payloads
 * over 2 MB and we keep every history payload under 64 KB, whatever the model wrote: a reply's
 * full text lives in Postgres, history carries only what the loop needs, bounded.
 */
import type { CommandRejection, ParsedCommand } from './loop-types.js';
import { clipText, jsonBytes } from './sanitize.js';

export const historyCaps = {
  /** Commands kept from one reply; the rest become one summary rejection. */
  maxCommands: 50,
  /** One command's `args`, as JSON in UTF-8. */
  maxArgsBytes: 8 * 1024,
  maxTypeChars: 100,
  maxDescriptionChars: 500,
  /** Rejections kept (the last slot becomes a summary when there are more). */
  maxRejected: 20,
  maxRawChars: 300,
  maxReasonChars: 300,
  maxParseErrors: 20,
  maxParseErrorChars: 300,
  maxSummaryChars: 240,
  /** The whole activity result, as JSON in UTF-8: well under the 64 KB history budget. */
  maxResultBytes: 48 * 1024,
} as const;

type HistoryCaps = typeof historyCaps;

/** The fields of a result that come from the model; the rest of T is small by construction. */
interface ModelDerived {
  summary: string;
  commands: ParsedCommand[];
  rejected: CommandRejection[];
  parseErrors: string[];
}

const summaryOf = (count: number, why: string): CommandRejection => ({
  raw: '',
  reason: `${count} more ${count === 1 ? 'command' : 'commands'} dropped: ${why}`,
});

function clipRejection(r: CommandRejection, caps: HistoryCaps): CommandRejection {
  return {
    ...(r.cmdId !== undefined ? { cmdId: clipText(r.cmdId, 64) } : {}),
    ...(r.type !== undefined ? { type: clipText(r.type, caps.maxTypeChars) } : {}),
    raw: clipText(r.raw, caps.maxRawChars),
    reason: clipText(r.reason, caps.maxReasonChars),
  };
}

/** At most `max` rejections: the first max-1 and one entry counting the rest (each text cut). */
export function capRejections(
  rejected: readonly CommandRejection[],
  caps: HistoryCaps = historyCaps,
  max: number = caps.maxRejected,
): CommandRejection[] {
  const clipped = rejected.slice(0, rejected.length <= max ? max : max - 1).map((r) => clipRejection(r, caps));
  if (rejected.length <= max) return clipped;
  const rest = rejected.slice(max - 1);
  // Summaries already in the tail count what they stand for, so nothing is counted twice or lost.
  const count = rest.reduce((n, r) => n + (summaryCount(r) ?? 1), 0);
  return [...clipped, summaryOf(count, `at most ${max} rejections are reported per reply`)];
}

/** How many commands a summary rejection stands for; undefined for an ordinary rejection. */
function summaryCount(r: CommandRejection): number | undefined {
  if (r.raw !== '' || r.cmdId !== undefined) return undefined;
  const m = /^(\d+) more commands? dropped: /.exec(r.reason);
  return m ? Number(m[1]) : undefined;
}

/**
 * Per-command caps: at most maxCommands commands, each with args ≤ maxArgsBytes and a short
 * type and description; a command over a cap becomes a rejection saying which. Rejections
 * capped by capRejections.
 */
export function capCommands(
  commands: readonly ParsedCommand[],
  rejected: readonly CommandRejection[],
  caps: HistoryCaps = historyCaps,
): { commands: ParsedCommand[]; rejected: CommandRejection[] } {
  const kept: ParsedCommand[] = [];
  const extra: CommandRejection[] = [];
  let overflow = 0;
  for (const c of commands) {
    const rawOf = () => clipText(JSON.stringify({ cmd_id: c.cmdId, type: c.type, args: c.args }), caps.maxRawChars);
    if (c.type.length > caps.maxTypeChars) {
      extra.push({ cmdId: c.cmdId, raw: rawOf(), reason: `type longer than ${caps.maxTypeChars} characters` });
      continue;
    }
    const argsBytes = jsonBytes(c.args);
    if (argsBytes > caps.maxArgsBytes) {
      extra.push({
        cmdId: c.cmdId,
        type: c.type,
        raw: rawOf(),
        reason: `args of ${argsBytes} bytes: at most ${caps.maxArgsBytes} bytes a command`,
      });
      continue;
    }
    if (kept.length >= caps.maxCommands) {
      overflow++;
      continue;
    }
    kept.push(
      c.description !== undefined && c.description.length > caps.maxDescriptionChars
        ? { ...c, description: clipText(c.description, caps.maxDescriptionChars) }
        : c,
    );
  }
  const all = [
    ...rejected,
    ...extra,
    ...(overflow ? [summaryOf(overflow, `at most ${caps.maxCommands} commands in one reply`)] : []),
  ];
  return { commands: kept, rejected: capRejections(all, caps) };
}

/**
 * The result with its model-derived fields capped (capCommands, parse errors, summary) and,
 * if it is still over maxResultBytes as JSON, shrunk until it fits: fewer parse errors and
 * rejections first, then commands from the end (counted in a summary rejection). Never throws;
 * the JSON of the returned value is under maxResultBytes whatever the model wrote.
 */
export function boundForHistory<T extends ModelDerived>(result: T, caps: HistoryCaps = historyCaps): T {
  const capped = capCommands(result.commands, result.rejected, caps);
  let out: T = {
    ...result,
    summary: clipText(result.summary, caps.maxSummaryChars),
    commands: capped.commands,
    rejected: capped.rejected,
    parseErrors: capParseErrors(result.parseErrors, caps, caps.maxParseErrors),
  };
  if (jsonBytes(out) < caps.maxResultBytes) return out;
  out = {
    ...out,
    parseErrors: capParseErrors(out.parseErrors, caps, 3),
    rejected: capRejections(out.rejected, caps, 5),
  };
  let dropped = 0;
  while (jsonBytes(out) >= caps.maxResultBytes && out.commands.length > 0) {
    // Halve what is dropped each round would be faster; 50 commands at most keeps this cheap.
    out = { ...out, commands: out.commands.slice(0, -1) };
    dropped++;
  }
  if (dropped)
    out = {
      ...out,
      rejected: capRejections(
        [
          ...out.rejected,
          summaryOf(dropped, `a tick carries at most ${caps.maxResultBytes} bytes of commands and rejections`),
        ],
        caps,
        5,
      ),
    };
  if (jsonBytes(out) < caps.maxResultBytes) return out;
  // Only what T itself carries beyond the model-derived fields is left: cut those to the bone.
  const total = out.rejected.reduce((n, r) => n + (summaryCount(r) ?? 1), 0);
  return {
    ...out,
    summary: clipText(out.summary, 80),
    parseErrors: [],
    rejected: total ? [summaryOf(total, 'the reply was too large to report')] : [],
  };
}

function capParseErrors(errors: readonly string[], caps: HistoryCaps, max: number): string[] {
  const kept = errors.slice(0, errors.length <= max ? max : max - 1).map((e) => clipText(e, caps.maxParseErrorChars));
  return errors.length <= max ? kept : [...kept, `… and ${errors.length - kept.length} more problems`];
}
