/**
 * Comparing agent files item by item, three ways. An item is one thing a person reads as one:
 * the name, one identity field, one system prompt, the thinking method, one goal (by title), one
 * pinned task (by title), one ethics policy (by title), one config key, one role's models, one
 * validator (by model), one MCP server (by name), one lifeforce, pace or idle setting, one peer (by id).
 *
 * Three documents meet: the base (the file as last applied), the live agent (read back from the
 * database) and the file being applied. For each item the file manages:
 *
 *   file = live                    nothing to do
 *   file = base, live ≠ base       drift: the agent changed it since; its value is kept
 *   file ≠ base, live = base       a change to apply
 *   all three differ               a conflict: refused unless the caller overwrites drift
 *
 * A file manages the fields it states; in a list it states (goals, tasks, ethics, peers,
 * config, validators, MCP servers) it manages every entry, so an entry it drops is removed — unless the file
 * never had it: then it is the agent's own (drift, kept). With no base for an item (the first
 * apply, or a key the file states for the first time), the file's value wins over the agent's.
 */
import { isPlainObject } from '../values.js';
import type { AgentDocument } from './schema.js';

/** An item's key in the document, as a person reads it: `goals["Ship v1"]`, `identity.persona`. */
export type ItemKey = string;

const keyed = ['goals', 'tasks', 'ethics', 'peers', 'config', 'models.validators', 'tools.mcp'] as const;

/** The canonical JSON of a value: undefined fields dropped, object keys sorted. */
export function canonicalJson(value: unknown): string {
  return (
    JSON.stringify(value, (_k, v: unknown) =>
      isPlainObject(v)
        ? Object.fromEntries(
            Object.entries(v)
              .filter(([, x]) => x !== undefined)
              .sort(([a], [b]) => (a < b ? -1 : 1)),
          )
        : v,
    ) ?? 'undefined'
  );
}

const same = (a: unknown, b: unknown) => canonicalJson(a) === canonicalJson(b);

const entryKey = (list: string, id: string) => `${list}[${JSON.stringify(id)}]`;

/** Every item of a document, and which of them the document states (manages). */
export function itemsOf(doc: AgentDocument): { values: Map<ItemKey, unknown>; managed: (key: ItemKey) => boolean } {
  const values = new Map<ItemKey, unknown>();
  const lists = new Set<string>();
  const put = (k: ItemKey, v: unknown) => {
    if (v !== undefined) values.set(k, v);
  };
  put('name', doc.name);
  put('description', doc.description);
  for (const [k, v] of Object.entries(doc.identity ?? {})) put(`identity.${k}`, v);
  for (const [k, v] of Object.entries(doc.systemPrompt ?? {})) put(`systemPrompt.${k}`, v);
  if (doc.thinkingMethod !== undefined) values.set('thinkingMethod', doc.thinkingMethod);
  const list = <T>(name: string, entries: readonly T[] | undefined, id: (t: T) => string) => {
    if (entries === undefined) return;
    lists.add(name);
    for (const e of entries) values.set(entryKey(name, id(e)), e);
  };
  list('goals', doc.goals, (g) => g.title);
  list('tasks', doc.tasks, (t) => t.title);
  list('ethics', doc.ethics, (e) => e.title);
  list('peers', doc.peers, (p) => p.id);
  if (doc.config !== undefined) lists.add('config');
  for (const [k, v] of Object.entries(doc.config ?? {})) values.set(entryKey('config', k), v);
  const { validators, ...roles } = doc.models ?? {};
  for (const [role, names] of Object.entries(roles)) put(`models.${role}`, names);
  list('models.validators', validators, (v) => v.model);
  list('tools.mcp', doc.tools?.mcp, (e) => e.name);
  for (const [k, v] of Object.entries(doc.lifeforce ?? {})) put(`lifeforce.${k}`, v);
  for (const [k, v] of Object.entries(doc.pace ?? {})) put(`pace.${k}`, v);
  for (const [k, v] of Object.entries(doc.idle ?? {})) put(`idle.${k}`, v);
  const listOf = (k: ItemKey) => keyed.find((l) => k.startsWith(`${l}[`));
  return {
    values,
    managed: (k) => {
      const l = listOf(k);
      return l !== undefined ? lists.has(l) : values.has(k);
    },
  };
}

export type ItemOutcome = 'change' | 'drift' | 'conflict';

/** One item that differs: its three values (undefined: absent). */
export interface ItemDifference {
  key: ItemKey;
  outcome: ItemOutcome;
  base: unknown;
  live: unknown;
  file: unknown;
}

export interface Comparison {
  /** What the file changes (to apply). */
  changes: ItemDifference[];
  /** What the agent changed itself since the last apply, and the file does not: kept. */
  drift: ItemDifference[];
  /** What both the file and the agent changed: refused unless drift is overwritten. */
  conflicts: ItemDifference[];
}

/** Compare the file with the live agent (null: it does not exist yet) and the base (null: never applied). */
export function compareDocuments(o: {
  base: AgentDocument | null;
  live: AgentDocument | null;
  file: AgentDocument;
}): Comparison {
  const file = itemsOf(o.file);
  const live = o.live ? itemsOf(o.live) : { values: new Map<ItemKey, unknown>(), managed: () => false };
  const base = o.base ? itemsOf(o.base) : null;
  const keys = new Set<ItemKey>();
  for (const k of [...file.values.keys(), ...live.values.keys(), ...(base?.values.keys() ?? [])])
    if (file.managed(k)) keys.add(k);
  const out: Comparison = { changes: [], drift: [], conflicts: [] };
  for (const key of [...keys].sort(itemOrder)) {
    const f = file.values.get(key);
    const l = live.values.get(key);
    if (same(f, l)) continue;
    // No base for this item: the file states it for the first time, so its value wins; an entry
    // only the agent has is the agent's own.
    const b = base?.managed(key) ? base.values.get(key) : f !== undefined ? l : undefined;
    const outcome: ItemOutcome = same(f, b) ? 'drift' : same(l, b) ? 'change' : 'conflict';
    const d: ItemDifference = { key, outcome, base: b, live: l, file: f };
    (outcome === 'change' ? out.changes : outcome === 'drift' ? out.drift : out.conflicts).push(d);
  }
  return out;
}

const sectionOrder = [
  'id',
  'name',
  'description',
  'identity',
  'systemPrompt',
  'thinkingMethod',
  'goals',
  'tasks',
  'ethics',
  'models',
  'tools',
  'lifeforce',
  'pace',
  'idle',
  'config',
  'peers',
];
function itemOrder(a: ItemKey, b: ItemKey): number {
  const sa = sectionOrder.indexOf(a.split(/[.[]/)[0]!);
  const sb = sectionOrder.indexOf(b.split(/[.[]/)[0]!);
  return sa !== sb ? sa - sb : a < b ? -1 : a > b ? 1 : 0;
}

/** The differences to write: the changes, and the conflicts too when drift is overwritten (drift keeps the agent's value). */
export function differencesToApply(c: Comparison, overwriteDrift: boolean): ItemDifference[] {
  return overwriteDrift ? [...c.changes, ...c.conflicts] : c.changes;
}

// ---- the readable diff -------------------------------------------------------------------------

/** One line of the diff a person reads. */
export interface DiffLine {
  outcome: ItemOutcome;
  /** `+` added, `-` removed, `~` changed. */
  op: '+' | '-' | '~';
  key: ItemKey;
  text: string;
}

function show(v: unknown, max = 80): string {
  const s = typeof v === 'string' ? JSON.stringify(v) : canonicalJson(v);
  return s.length > max ? `${s.slice(0, max - 1)}…` : s;
}

/** What differs between two values: field by field for objects, else `a → b`. */
function change(from: unknown, to: unknown): string {
  if (isPlainObject(from) && isPlainObject(to)) {
    const fields = [...new Set([...Object.keys(from), ...Object.keys(to)])].filter((k) => !same(from[k], to[k]));
    return fields
      .map(
        (k) =>
          `${k}: ${from[k] === undefined ? '(none)' : show(from[k], 60)} → ${to[k] === undefined ? '(none)' : show(to[k], 60)}`,
      )
      .join('; ');
  }
  return `${show(from)} → ${show(to)}`;
}

/** One diff line for a difference: from the agent's value to the file's (for drift: from the base's to the agent's). */
export function diffLine(d: ItemDifference): DiffLine {
  const [from, to] = d.outcome === 'drift' ? [d.base, d.live] : [d.live, d.file];
  const op = from === undefined ? '+' : to === undefined ? '-' : '~';
  const text =
    op === '+' ? `+ ${d.key}: ${show(to, 120)}` : op === '-' ? `- ${d.key}` : `~ ${d.key}: ${change(from, to)}`;
  const agent =
    d.base === undefined ? `added ${show(d.live, 60)}` : d.live === undefined ? 'removed it' : change(d.base, d.live);
  const conflict =
    d.outcome === 'conflict'
      ? ` (the agent ${d.base === undefined || d.live === undefined ? agent : `changed ${agent}`})`
      : '';
  return { outcome: d.outcome, op, key: d.key, text: `${text}${conflict}` };
}

/** The diff lines of a comparison: changes, then drift, then conflicts. */
export function diffLines(c: Comparison): DiffLine[] {
  return [...c.changes, ...c.drift, ...c.conflicts].map(diffLine);
}

/** The diff as text, in sections a person reads top to bottom; `nothing to change` when equal. */
export function formatDiff(c: Comparison, agentId: string, o: { overwriteDrift?: boolean } = {}): string {
  const out: string[] = [];
  const section = (title: string, list: ItemDifference[]) => {
    if (list.length === 0) return;
    out.push(`${title} (${list.length}):`);
    for (const d of list) out.push(`  ${diffLine(d).text}`);
  };
  section(`agent ${agentId}: changes`, c.changes);
  section(
    "drift: the agent's own changes since the last apply, kept (put them in the file to keep them for good)",
    c.drift,
  );
  section(
    o.overwriteDrift
      ? 'conflicts: changed by both the file and the agent; the file wins (--overwrite-drift)'
      : 'conflicts: changed by both the file and the agent; refused (pass --overwrite-drift to take the file)',
    c.conflicts,
  );
  if (c.changes.length === 0 && c.conflicts.length === 0) out.unshift(`agent ${agentId}: nothing to change`);
  return out.join('\n');
}
