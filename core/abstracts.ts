/**
 * Abstracts: digests of recent responses. The strategies (the demo successor-fork patch swaps
 * them) are pure functions from recent responses to a digest {title, summary, tags, sources},
 * with the quality measures a fork uses to compare two strategies; the trigger rules say when
 * the loop makes one by itself. No I/O, no clock: the same input gives the same abstract, so
 * a fork's replay is reproducible.
 */
import { z } from 'zod';

const abstractsStrategies = ['recency', 'keyword_cluster'] as const;
export type AbstractsStrategy = (typeof abstractsStrategies)[number];
export const abstractsStrategySchema = z.enum(abstractsStrategies);
/** What `abstracts_strategy` defaults to (and what rows written before strategies existed mean). */
export const defaultAbstractsStrategy: AbstractsStrategy = 'recency';

// --- when the loop makes an abstract by itself ---------------------------------------------------

/** `abstract_every`: every N ticks (N > 0; 0 = never), counted on the main loop's ticks. */
export function intervalAbstractDue(tick: number, every: number): boolean {
  return Number.isInteger(every) && every > 0 && tick > 0 && tick % every === 0;
}

/**
 * A goal closes when it becomes completed or failed, a task when it becomes done or failed:
 * those conclude work worth digesting. A cancelled task was dropped, not concluded; setting
 * the status it already has closes nothing.
 */
const closingStatuses = { goal: ['completed', 'failed'], task: ['done', 'failed'] } as const;

/** Does this status change close the goal or task? */
export function closes(kind: keyof typeof closingStatuses, from: string, to: string): boolean {
  return from !== to && (closingStatuses[kind] as readonly string[]).includes(to);
}

/**
 * The idempotency key of a triggered abstract: one per agent, tick and trigger, so a retried
 * activity (or a second goal closing in the same tick) finds the first one. A task loop counts
 * its own ticks, so its key names the task.
 */
export function abstractTriggerKey(trigger: string, tick: number, taskId?: number): string {
  return taskId === undefined ? `${tick}:${trigger}` : `task${taskId}.${tick}:${trigger}`;
}

/** One recent response as a strategy sees it. */
export interface AbstractSource {
  id: number;
  tick: number;
  content: string;
  tags: string[];
  /** New ideas the evaluator extracted from the reply (`ideas.new`). */
  ideas: string[];
}

export interface AbstractDraft {
  title: string;
  summary: string;
  tags: string[];
  sources: { responses: number[] };
  tickFrom: number;
  tickTo: number;
  strategy: AbstractsStrategy;
}

interface AbstractOptions {
  /** Summary length cap, characters (default 1200). */
  maxChars?: number;
  /** Tags kept (default 8). */
  maxTags?: number;
}

const stopwords = new Set(
  'a an and are as at be but by for from has have i if in into is it its me my not of on or our so that the their then there these this to was we were will with you your about after again all also any because been before being can could did do does done each few more most much must no nor now only other over own same should some such than too under until up very what when where which while who why would just like one two new next let lets yet'.split(
    ' ',
  ),
);

/** Lower-cased word tokens without stopwords (letters/digits, length ≥ 3). */
function keywords(text: string): string[] {
  return (text.toLowerCase().match(/[\p{L}\p{N}][\p{L}\p{N}_-]*/gu) ?? []).filter(
    (w) => w.length >= 3 && !stopwords.has(w),
  );
}

/** Sentences of a text (split on . ! ? and newlines), trimmed, empty ones dropped. */
function sentences(text: string): string[] {
  return text
    .split(/(?<=[.!?])\s+|\n+/)
    .map((s) => s.trim())
    .filter((s) => s.length > 0);
}

function jaccard(a: ReadonlySet<string>, b: ReadonlySet<string>): number {
  if (a.size === 0 && b.size === 0) return 1;
  let inter = 0;
  for (const x of a) if (b.has(x)) inter++;
  return inter / (a.size + b.size - inter);
}

function frame(sources: readonly AbstractSource[]): { ordered: AbstractSource[]; tickFrom: number; tickTo: number } {
  const ordered = [...sources].sort((a, b) => a.tick - b.tick || a.id - b.id);
  return { ordered, tickFrom: ordered[0]?.tick ?? 0, tickTo: ordered.at(-1)?.tick ?? 0 };
}

/**
 * The original digest: the first sentence of each response, newest first, until the length
 * cap; tags of the newest responses. Cheap, but it keeps whatever the newest replies repeat.
 */
export function recencyDigest(sources: readonly AbstractSource[], opts: AbstractOptions = {}): AbstractDraft {
  const maxChars = opts.maxChars ?? 1200;
  const maxTags = opts.maxTags ?? 8;
  const { ordered, tickFrom, tickTo } = frame(sources);
  const lines: string[] = [];
  let used = 0;
  for (const s of [...ordered].reverse()) {
    const first = sentences(s.content)[0];
    if (!first) continue;
    const line = `[${s.tick}] ${first}`;
    if (used + line.length + 1 > maxChars) break;
    lines.push(line);
    used += line.length + 1;
  }
  const tags: string[] = [];
  for (const s of [...ordered].reverse())
    for (const t of s.tags) if (!tags.includes(t) && tags.length < maxTags) tags.push(t);
  return {
    title: `Ticks ${tickFrom}–${tickTo}`,
    summary: lines.join('\n'),
    tags,
    sources: { responses: ordered.map((s) => s.id) },
    tickFrom,
    tickTo,
    strategy: 'recency',
  };
}

/**
 * Keyword-clustered extractive digest: score sentences by the document frequency of their
 * keywords and ideas, then pick greedily the best sentence that is not a near-duplicate
 * (Jaccard ≥ 0.5) of one already picked and that covers keywords not yet covered. Fewer,
 * more distinct lines; tags are the top keywords and response tags by frequency.
 */
export function keywordClusterDigest(sources: readonly AbstractSource[], opts: AbstractOptions = {}): AbstractDraft {
  const maxChars = opts.maxChars ?? 1200;
  const maxTags = opts.maxTags ?? 8;
  const { ordered, tickFrom, tickTo } = frame(sources);
  const df = new Map<string, number>();
  for (const s of ordered)
    for (const w of new Set([...keywords(s.content), ...s.ideas.flatMap(keywords), ...s.tags]))
      df.set(w, (df.get(w) ?? 0) + 1);
  const candidates = ordered.flatMap((s) =>
    [...s.ideas, ...sentences(s.content)].map((text, i) => ({
      tick: s.tick,
      text,
      order: s.tick * 1000 + i,
      words: new Set(keywords(text)),
    })),
  );
  // Words worth covering: the ideas' and tags' words, and words more than one reply uses.
  const important = new Set<string>([
    ...ordered.flatMap((s) => [...s.ideas.flatMap(keywords), ...s.tags.map((t) => t.toLowerCase())]),
  ]);
  for (const [w, n] of df) if (n >= 2) important.add(w);
  const covered = new Set<string>();
  const picked: typeof candidates = [];
  let used = 0;
  for (;;) {
    let best: (typeof candidates)[number] | undefined;
    let bestScore = 0;
    for (const c of candidates) {
      if (picked.includes(c) || c.words.size === 0) continue;
      if (picked.some((p) => jaccard(p.words, c.words) >= 0.5)) continue;
      let score = 0;
      for (const w of c.words) if (important.has(w) && !covered.has(w)) score += df.get(w) ?? 1;
      score /= Math.sqrt(c.words.size);
      if (score > bestScore || (score === bestScore && best && c.order < best.order)) {
        best = c;
        bestScore = score;
      }
    }
    if (!best || bestScore === 0) break;
    const line = `- ${best.text}`;
    if (used + line.length + 1 > maxChars) {
      candidates.splice(candidates.indexOf(best), 1);
      continue;
    }
    picked.push(best);
    used += line.length + 1;
    for (const w of best.words) covered.add(w);
  }
  picked.sort((a, b) => a.order - b.order);
  // Tags: the replies' own tags by frequency, then the ideas' keywords by frequency.
  const freq = (words: string[]) => {
    const m = new Map<string, number>();
    for (const w of words) m.set(w, (m.get(w) ?? 0) + 1);
    return [...m.entries()].sort((a, b) => b[1] - a[1] || (a[0] < b[0] ? -1 : 1)).map(([w]) => w);
  };
  const ranked = [
    ...new Set([
      ...freq(ordered.flatMap((s) => s.tags.map((t) => t.toLowerCase()))),
      ...freq(ordered.flatMap((s) => s.ideas.flatMap(keywords))),
    ]),
  ];
  const tags = ranked.slice(0, maxTags);
  return {
    title: `Ticks ${tickFrom}–${tickTo}: ${ranked.slice(0, 3).join(', ') || 'no keywords'}`,
    summary: picked.map((p) => `- ${p.text}`).join('\n'),
    tags,
    sources: { responses: ordered.map((s) => s.id) },
    tickFrom,
    tickTo,
    strategy: 'keyword_cluster',
  };
}

const strategies: Record<
  AbstractsStrategy,
  (sources: readonly AbstractSource[], opts?: AbstractOptions) => AbstractDraft
> = {
  recency: recencyDigest,
  keyword_cluster: keywordClusterDigest,
};

/** Make an abstract by strategy name. */
export function makeAbstractDraft(
  strategy: AbstractsStrategy,
  sources: readonly AbstractSource[],
  opts?: AbstractOptions,
): AbstractDraft {
  return strategies[strategy](sources, opts);
}

/** Measured quality of one abstract against the responses it digests. */
export interface AbstractQuality {
  /** Share of the distinct ideas and tags of the sources the abstract mentions (0…1). */
  coverage: number;
  /** Summary characters / source characters. */
  compressionRatio: number;
  /** 1 − the share of summary lines that near-duplicate an earlier line (0…1). */
  novelty: number;
  /** Tokens the abstract costs when shown in a context (ceil(chars / 4), the scripted count). */
  tokens: number;
}

/** An idea counts as covered when ≥ half its keywords occur in the summary or tags. */
export function measureAbstract(
  draft: Pick<AbstractDraft, 'summary' | 'tags' | 'title'>,
  sources: readonly AbstractSource[],
): AbstractQuality {
  const present = new Set([
    ...keywords(draft.summary),
    ...keywords(draft.title),
    ...draft.tags.flatMap((t) => [t.toLowerCase(), ...keywords(t)]),
  ]);
  const items = new Map<string, string[]>();
  for (const s of sources) {
    for (const idea of s.ideas) items.set(`idea:${idea.toLowerCase()}`, keywords(idea));
    for (const t of s.tags) items.set(`tag:${t.toLowerCase()}`, [t.toLowerCase()]);
  }
  let covered = 0;
  let counted = 0;
  for (const words of items.values()) {
    if (words.length === 0) continue;
    counted++;
    const hit = words.filter((w) => present.has(w)).length;
    if (hit * 2 >= words.length) covered++;
  }
  const lines = draft.summary.split('\n').filter((l) => l.trim());
  const seen: Array<Set<string>> = [];
  let dup = 0;
  for (const l of lines) {
    const w = new Set(keywords(l));
    if (seen.some((p) => jaccard(p, w) >= 0.5)) dup++;
    seen.push(w);
  }
  const sourceChars = sources.reduce((n, s) => n + s.content.length, 0);
  const chars = draft.title.length + draft.summary.length + draft.tags.join(' ').length;
  return {
    coverage: counted === 0 ? 1 : covered / counted,
    compressionRatio: sourceChars === 0 ? 0 : draft.summary.length / sourceChars,
    novelty: lines.length === 0 ? 0 : 1 - dup / lines.length,
    tokens: Math.ceil(chars / 4),
  };
}

/** Mean of each quality measure over several abstracts (zeros when there are none). */
export function meanQuality(qs: readonly AbstractQuality[]): AbstractQuality {
  const n = qs.length || 1;
  const sum = (k: keyof AbstractQuality) => qs.reduce((a, q) => a + q[k], 0) / n;
  return {
    coverage: sum('coverage'),
    compressionRatio: sum('compressionRatio'),
    novelty: sum('novelty'),
    tokens: sum('tokens'),
  };
}
