/**
 * Emotional evaluation: the LLM that wrote a reply names its emotions as
 * `emotion:strength(1–5) (reason)`. Pure parsing and streak maths; the mini-prompt is an
 * activity (activities/reflexes/).
 */

export interface EmotionReading {
  emotion: string;
  strength: number;
  reason?: string;
}

interface ParsedEmotions {
  readings: EmotionReading[];
  /** Emotion names not in the configured list (to be appended to it). */
  unknown: string[];
  /** Items that did not match the format (recorded, never fatal). */
  malformed: string[];
}

const maxEmotionName = 32;
const maxEmotionList = 50;
const maxReason = 200;

/** Split on newlines, commas and semicolons that are not inside parentheses. */
function splitItems(text: string): string[] {
  const items: string[] = [];
  let depth = 0;
  let cur = '';
  for (const ch of text) {
    if (ch === '(') depth++;
    if (ch === ')') depth = Math.max(0, depth - 1);
    if ((ch === '\n' || ((ch === ',' || ch === ';') && depth === 0)) && depth === 0) {
      items.push(cur);
      cur = '';
    } else cur += ch;
  }
  items.push(cur);
  return items.map((s) => s.trim()).filter((s) => s.length > 0);
}

const itemRe =
  /^(?:[-*•]\s*|\d+[.)]\s*)?([\p{L}][\p{L}\p{N} _-]*?)\s*:\s*([+-]?\d+(?:\.\d+)?)(?:\s*\/\s*5)?\s*(?:\((.*)\))?\s*\.?$/u;

/** The prompt's format line, e.g. for the emotion mini-prompt. */
export function emotionFormatInstructions(known: readonly string[]): string {
  return [
    'Name the emotions of the reply above, one per line, as `emotion:strength (reason)`,',
    'strength an integer 1 to 5, reason a few words. Prefer these emotions:',
    known.join(', '),
    'Answer with the lines only.',
  ].join('\n');
}

/** Parse an emotion answer. Never throws; anything off-format lands in `malformed`. */
export function parseEmotions(text: string, known: readonly string[]): ParsedEmotions {
  const out: ParsedEmotions = { readings: [], unknown: [], malformed: [] };
  const knownSet = new Set(known.map((k) => k.toLowerCase()));
  const seen = new Set<string>();
  for (const item of splitItems(typeof text === 'string' ? text : '')) {
    const m = itemRe.exec(item);
    const name = m?.[1]?.trim().toLowerCase().replace(/\s+/g, '_');
    const strength = m ? Number(m[2]) : NaN;
    if (!m || !name || name.length > maxEmotionName || !Number.isInteger(strength) || strength < 1 || strength > 5) {
      out.malformed.push(item.slice(0, 200));
      continue;
    }
    if (seen.has(name)) continue; // first reading of an emotion wins
    seen.add(name);
    const reason = m[3]?.trim();
    out.readings.push({ emotion: name, strength, ...(reason ? { reason: reason.slice(0, maxReason) } : {}) });
    if (!knownSet.has(name)) out.unknown.push(name);
  }
  return out;
}

/** The configured list with new names appended (deduplicated, capped). */
export function mergeEmotionList(known: readonly string[], unknown: readonly string[]): string[] {
  const out = [...known];
  const have = new Set(known.map((k) => k.toLowerCase()));
  for (const u of unknown) {
    if (out.length >= maxEmotionList) break;
    if (!have.has(u)) {
      out.push(u);
      have.add(u);
    }
  }
  return out;
}

/** Anxiety above `threshold` on `ticks` ticks in a row triggers Reflex-lite (config `anxiety_threshold`, `anxiety_ticks`). */
export const defaultAnxiety = { threshold: 3, ticks: 3 } as const;

/** Consecutive ticks with anxiety above `above`: the new streak after this tick's readings. */
export function nextAnxietyStreak(
  previous: number,
  readings: readonly EmotionReading[],
  above: number = defaultAnxiety.threshold,
): number {
  const anxious = readings.some((r) => r.emotion === 'anxiety' && r.strength > above);
  return anxious ? previous + 1 : 0;
}

/** 0..1: the strongest emotion's strength over 5 (0 with none). */
export function emotionIntensity(readings: readonly Pick<EmotionReading, 'strength'>[]): number {
  let max = 0;
  for (const r of readings) if (Number.isFinite(r.strength)) max = Math.max(max, r.strength);
  return Math.min(1, Math.max(0, max / 5));
}
