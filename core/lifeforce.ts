/**
 * Lifeforce: the agent's budget, in one unit (LF). Every costly operation reserves its worst
 * case before it runs, settles the actual cost after it and gets the difference back; waiting
 * and the heartbeat are free. This module is the arithmetic — prices, worst cases and the
 * budget's state transitions — with no I/O and no clock (times come in as arguments), so the
 * database layer (db/queries/lifeforce.ts) and the property tests share one definition.
 *
 * A budget holds `balance` (free to reserve), `reserved` (held by running operations) and
 * `spent` (settled). Its funding is what it started with plus grants, regeneration and what
 * was carved into it; at every step `balance + reserved + spent = funded` and no term is
 * negative, so settled spend can never exceed what the budget was given.
 */
import { z } from 'zod';

/** LF amounts are kept to 4 decimals (the ledger's numeric scale). */
const lfScale = 10_000;

/** Round an amount of LF up to the ledger's scale (a charge is never rounded down). */
export function lfCeil(x: number): number {
  return Math.ceil(Math.max(0, x) * lfScale - 1e-6) / lfScale;
}

/** Round to the ledger's scale (sums of already-rounded amounts). */
export function lfRound(x: number): number {
  return Math.round(x * lfScale) / lfScale;
}

// ---- prices -------------------------------------------------------------------------------------

/** What things cost in LF: the one price table (MINDLOOP_LIFEFORCE_PRICES overrides any field). */
export const priceTableSchema = z.strictObject({
  /** 1 USD of provider price → LF. */
  lfPerUsd: z.number().min(0).default(1000),
  /** Computation: every 1 000 tokens read or written, whatever the provider charges (local models cost too). */
  lfPer1kTokens: z.number().min(0).default(1),
  /** One CPU-second of a sandbox run (wall seconds × CPUs). */
  lfPerSandboxCpuSecond: z.number().min(0).default(1),
  /** One second of audio transcribed or spoken. */
  lfPerSpeechSecond: z.number().min(0).default(0.5),
  /** One call of an MCP server's tool, whatever it takes. */
  lfPerMcpCall: z.number().min(0).default(1),
  /** Each second an MCP tool call runs, besides its price per call. */
  lfPerMcpSecond: z.number().min(0).default(0),
  /** A fork evaluation's fixed cost, besides the LLM calls and sandbox runs it makes. */
  lfPerForkEvaluation: z.number().min(0).default(10),
  /** A call that names no maxTokens is capped at this many output tokens, so its worst case is known. */
  defaultMaxOutputTokens: z.number().int().min(1).default(1024),
  /** How long an operation's reservation may stay open before the sweep releases it (a dead worker's). */
  reservationTtlMs: z
    .number()
    .int()
    .min(1000)
    .default(30 * 60_000),
});
export type PriceTable = z.output<typeof priceTableSchema>;
export const defaultPrices: PriceTable = priceTableSchema.parse({});

interface LlmPrice {
  costPer1kInput: number;
  costPer1kOutput: number;
  /** USD per 1 000 prompt tokens read from the provider's prompt cache; absent or null: the input price. */
  costPer1kCachedInput?: number | null;
}
interface TokenCount {
  promptTokens: number;
  completionTokens: number;
  /** Of `promptTokens`, those read from the provider's prompt cache; absent or null: none. */
  cachedPromptTokens?: number | null;
}

/**
 * The share of an uncached prompt token's computation a cached one costs: the row's cached price
 * over its input price, at most 1; 1 when the row gives no cached price or no input price.
 */
export function cachedInputShare(price: LlmPrice): number {
  const cached = price.costPer1kCachedInput;
  if (cached === undefined || cached === null || !(price.costPer1kInput > 0)) return 1;
  return Math.min(1, Math.max(0, cached / price.costPer1kInput));
}

/**
 * The LF of an LLM call: the row's USD price of the tokens plus their computation. A prompt token
 * the provider read from its cache is priced at the row's cached price, and its computation at the
 * same share of an uncached token's (the provider did not compute it again).
 */
export function llmCost(prices: PriceTable, price: LlmPrice, usage: TokenCount): number {
  const prompt = Math.max(0, usage.promptTokens);
  const completion = Math.max(0, usage.completionTokens);
  const cached = Math.min(prompt, Math.max(0, usage.cachedPromptTokens ?? 0));
  const share = cachedInputShare(price);
  const uncached = prompt - cached;
  const usd =
    (uncached / 1000) * price.costPer1kInput +
    (cached / 1000) * (price.costPer1kCachedInput ?? price.costPer1kInput) +
    (completion / 1000) * price.costPer1kOutput;
  const tokens = uncached + cached * share + completion;
  return lfCeil(usd * prices.lfPerUsd + (tokens / 1000) * prices.lfPer1kTokens);
}

/** The LF of an MCP tool call that ran `ms` (its worst case: the call's timeout). */
export function mcpCost(prices: PriceTable, ms: number): number {
  return lfCeil(prices.lfPerMcpCall + (Math.max(0, ms) / 1000) * prices.lfPerMcpSecond);
}

/** UTF-8 length of a string (no Buffer: workflows import this module too). */
function utf8Length(text: string): number {
  let n = 0;
  for (let i = 0; i < text.length; i++) {
    const c = text.charCodeAt(i);
    if (c < 0x80) n += 1;
    else if (c < 0x800) n += 2;
    else if (c >= 0xd800 && c <= 0xdbff) {
      n += 4;
      i++;
    } else n += 3;
  }
  return n;
}

/**
 * A prompt message as the bound reads it. `chars` is set where only the beginning of the text is
 * at hand (a stored prompt cut to its row's cap): the whole text's length in UTF-16 units.
 */
interface PromptText {
  content: string;
  chars?: number;
}

/**
 * An upper bound of a prompt's tokens: tokenizers in use emit at most one token per UTF-8 byte,
 * plus a few per message for the chat template. The missing part of a cut text counts 3 bytes a
 * UTF-16 unit, the most one takes.
 */
export function promptTokenBound(messages: readonly PromptText[]): number {
  let bytes = 0;
  for (const m of messages) bytes += utf8Length(m.content) + 3 * Math.max(0, (m.chars ?? 0) - m.content.length) + 16;
  return bytes + 16;
}

/** The worst case of an LLM call: every prompt byte a token, and the full output cap. */
export function llmWorstCase(
  prices: PriceTable,
  price: LlmPrice,
  messages: readonly PromptText[],
  maxTokens: number | undefined,
): number {
  // A cached price above the input price (a provider's cache write) must not make the bound too low.
  const prompt = Math.max(price.costPer1kInput, price.costPer1kCachedInput ?? 0);
  return llmCost(
    prices,
    { ...price, costPer1kInput: prompt },
    {
      promptTokens: promptTokenBound(messages),
      completionTokens: maxTokens ?? prices.defaultMaxOutputTokens,
    },
  );
}

/** A sandbox run: wall seconds × CPUs. */
export function sandboxCost(prices: PriceTable, wallMs: number, cpus: number): number {
  return lfCeil((Math.max(0, wallMs) / 1000) * Math.max(1, cpus) * prices.lfPerSandboxCpuSecond);
}

/** Seconds of audio, heard or spoken. */
export function speechCost(prices: PriceTable, seconds: number): number {
  return lfCeil(Math.max(0, seconds) * prices.lfPerSpeechSecond);
}

// ---- budgets ------------------------------------------------------------------------------------

export const budgetScopes = ['agent', 'task', 'campaign', 'fork', 'nerve', 'escalation'] as const;
export type BudgetScope = (typeof budgetScopes)[number];

/** Budget ids are business keys: `agent:demo`, `task:demo/3`, `campaign:c1`, `fork:f1`, `nerve:demo/collision`. */
export const budgetIds = {
  agent: (agentId: string) => `agent:${agentId}`,
  task: (agentId: string, taskId: number) => `task:${agentId}/${taskId}`,
  campaign: (campaignId: string) => `campaign:${campaignId}`,
  fork: (forkId: string) => `fork:${forkId}`,
  nerve: (agentId: string, nerve: string) => `nerve:${agentId}/${nerve}`,
  escalation: (escalationId: string) => `escalation:${escalationId}`,
};

/** A spending limit over a calendar window (UTC day `2026-11-24`, month `2026-11`). */
interface Envelope {
  limit: number | null;
  window: string;
  /** Reserved or settled in the window. */
  used: number;
}

export interface BudgetState {
  /** null: unlimited (spend is still recorded, envelopes still hold). */
  capacity: number | null;
  /** Free to reserve (null when unlimited). */
  balance: number | null;
  reserved: number;
  spent: number;
  /** Everything the budget was given: the start, grants, regeneration, carves in. */
  funded: number;
  /** LF per hour regenerated up to `capacity` (0: none). */
  regenPerHour: number;
  /** Regeneration is computed up to here (ms since the epoch). */
  regenAt: number;
  daily: Envelope;
  monthly: Envelope;
  closed: boolean;
}

export interface BudgetSettings {
  capacity: number | null;
  regenPerHour?: number;
  dailyLimit?: number | null;
  monthlyLimit?: number | null;
}

export function dayWindow(at: number): string {
  return new Date(at).toISOString().slice(0, 10);
}
export function monthWindow(at: number): string {
  return new Date(at).toISOString().slice(0, 7);
}

/** A new budget holding `capacity` (or unlimited), as of `at`. */
export function newBudget(settings: BudgetSettings, at: number): BudgetState {
  const capacity = settings.capacity === null ? null : lfRound(Math.max(0, settings.capacity));
  return {
    capacity,
    balance: capacity,
    reserved: 0,
    spent: 0,
    funded: capacity ?? 0,
    regenPerHour: Math.max(0, settings.regenPerHour ?? 0),
    regenAt: at,
    daily: { limit: settings.dailyLimit ?? null, window: dayWindow(at), used: 0 },
    monthly: { limit: settings.monthlyLimit ?? null, window: monthWindow(at), used: 0 },
    closed: false,
  };
}

/** Regeneration up to `at`: the balance refills at `regenPerHour`, never past `capacity` (time never runs back). */
export function regenerate(b: BudgetState, at: number): BudgetState {
  if (at <= b.regenAt) return b;
  if (b.capacity === null || b.balance === null || b.regenPerHour <= 0) return { ...b, regenAt: at };
  const room = lfRound(b.capacity - b.reserved - b.balance);
  const gain =
    room <= 0 ? 0 : Math.min(room, Math.floor(((at - b.regenAt) / 3_600_000) * b.regenPerHour * lfScale) / lfScale);
  return { ...b, balance: lfRound(b.balance + gain), funded: lfRound(b.funded + gain), regenAt: at };
}

function rollEnvelope(e: Envelope, window: string): Envelope {
  return e.window === window ? e : { ...e, window, used: 0 };
}

export type DenyReason = 'balance' | 'daily' | 'monthly' | 'closed';

type ReserveOutcome =
  | { ok: true; budget: BudgetState; windows: { day: string; month: string } }
  | { ok: false; reason: DenyReason; available: number | null; budget: BudgetState };

/** What may still be reserved now: the balance, narrowed by the envelopes (null: unlimited). */
export function available(b: BudgetState): number | null {
  const limits = [
    b.balance,
    b.daily.limit === null ? null : b.daily.limit - b.daily.used,
    b.monthly.limit === null ? null : b.monthly.limit - b.monthly.used,
  ].filter((x): x is number => x !== null);
  return limits.length === 0 ? null : lfRound(Math.max(0, Math.min(...limits)));
}

/** Hold `amount` for an operation about to run, or say why the budget cannot. */
export function reserve(before: BudgetState, amount: number, at: number): ReserveOutcome {
  const b0 = regenerate(before, at);
  const b = { ...b0, daily: rollEnvelope(b0.daily, dayWindow(at)), monthly: rollEnvelope(b0.monthly, monthWindow(at)) };
  const a = lfRound(amount);
  if (b.closed) return { ok: false, reason: 'closed', available: 0, budget: b };
  if (b.balance !== null && a > b.balance) return { ok: false, reason: 'balance', available: available(b), budget: b };
  if (b.daily.limit !== null && lfRound(b.daily.used + a) > b.daily.limit)
    return { ok: false, reason: 'daily', available: available(b), budget: b };
  if (b.monthly.limit !== null && lfRound(b.monthly.used + a) > b.monthly.limit)
    return { ok: false, reason: 'monthly', available: available(b), budget: b };
  return {
    ok: true,
    windows: { day: b.daily.window, month: b.monthly.window },
    budget: {
      ...b,
      balance: b.balance === null ? null : lfRound(b.balance - a),
      reserved: lfRound(b.reserved + a),
      daily: { ...b.daily, used: lfRound(b.daily.used + a) },
      monthly: { ...b.monthly, used: lfRound(b.monthly.used + a) },
    },
  };
}

/**
 * Close a reservation of `reserved` with the operation's actual cost: the actual is charged (on a
 * limited budget never more than was reserved: an operation cannot overspend; an unlimited one
 * records what it really cost), the rest goes back to the balance and to the envelopes of the
 * windows it was reserved in. A release is a settle of 0.
 */
export function settle(
  b: BudgetState,
  reserved: number,
  actual: number,
  windows: { day: string; month: string },
): { budget: BudgetState; charged: number; overrun: number } {
  const r = lfRound(Math.min(reserved, b.reserved));
  const charged = lfRound(b.balance === null ? Math.max(0, actual) : Math.min(r, Math.max(0, actual)));
  const refund = lfRound(Math.max(0, r - charged));
  const back = (e: Envelope, w: string): Envelope =>
    e.window === w ? { ...e, used: lfRound(Math.max(0, e.used - refund)) } : e;
  return {
    charged,
    overrun: lfRound(Math.max(0, actual - charged)),
    budget: {
      ...b,
      balance: b.balance === null ? null : lfRound(b.balance + refund),
      reserved: lfRound(b.reserved - r),
      spent: lfRound(b.spent + charged),
      daily: back(b.daily, windows.day),
      monthly: back(b.monthly, windows.month),
    },
  };
}

/** Add to a budget (a human's grant, a parent's carve into its child). */
export function grant(b: BudgetState, amount: number): BudgetState {
  const a = lfRound(Math.max(0, amount));
  return { ...b, balance: b.balance === null ? null : lfRound(b.balance + a), funded: lfRound(b.funded + a) };
}

/** The invariant every state must keep (the property tests check it after every step). */
export function checkInvariant(b: BudgetState): string | null {
  if (b.reserved < 0 || b.spent < 0) return `negative reserved/spent: ${b.reserved}/${b.spent}`;
  if (b.balance !== null && b.balance < 0) return `negative balance ${b.balance}`;
  if (b.balance !== null && Math.abs(b.balance + b.reserved + b.spent - b.funded) > 1e-6)
    return `balance ${b.balance} + reserved ${b.reserved} + spent ${b.spent} ≠ funded ${b.funded}`;
  if (b.balance !== null && b.spent > b.funded + 1e-6) return `spent ${b.spent} > funded ${b.funded}`;
  for (const e of [b.daily, b.monthly])
    if (e.limit !== null && e.used > e.limit + 1e-6) return `envelope ${e.window} used ${e.used} > ${e.limit}`;
  return null;
}

/** Ms from `at` to the start of the next UTC day / month. */
function msToNextWindow(at: number, unit: 'day' | 'month'): number {
  const d = new Date(at);
  const next =
    unit === 'day'
      ? Date.UTC(d.getUTCFullYear(), d.getUTCMonth(), d.getUTCDate() + 1)
      : Date.UTC(d.getUTCFullYear(), d.getUTCMonth() + 1, 1);
  return next - at;
}

/**
 * How long from `at` until `need` is reservable by waiting alone: regeneration refilling the
 * balance, a new day or month opening an envelope (0: now; null: never, only a grant helps).
 */
export function msUntilAvailable(before: BudgetState, need: number, at = before.regenAt): number | null {
  const b = regenerate(before, at);
  if (b.closed) return null;
  let wait = 0;
  if (b.balance !== null && lfRound(need - b.balance) > 0) {
    if (b.regenPerHour <= 0 || b.capacity === null || need > b.capacity - b.reserved) return null;
    wait = Math.ceil((lfRound(need - b.balance) / b.regenPerHour) * 3_600_000);
  }
  const envelopes = [
    [b.daily, dayWindow(at), 'day'],
    [b.monthly, monthWindow(at), 'month'],
  ] as const;
  for (const [e, window, unit] of envelopes) {
    if (e.limit === null) continue;
    if (need > e.limit) return null;
    const used = e.window === window ? e.used : 0;
    if (lfRound(used + need) > e.limit) wait = Math.max(wait, msToNextWindow(at, unit));
  }
  return wait;
}

// ---- what an agent needs to go on ------------------------------------------------------------

/** What is known of an agent's next think (db/queries/lifeforce.ts `thinkBasis` reads it). */
export interface ThinkBasis {
  /** The prices of the registry row a think asks first; null: the agent has no usable model. */
  model: LlmPrice | null;
  /** The output cap its loop asks for (`max_tokens`). */
  maxTokens: number;
  /** Its prompt: the last think's, or before any, the part every prompt carries (then a floor). */
  prompt: readonly PromptText[];
}

/**
 * What the agent's next think reserves: the router's worst case for the row it asks first, a
 * prompt as long as the basis's and the full output cap (null: no model, nothing is reserved).
 */
export function thinkReservation(prices: PriceTable, basis: ThinkBasis): number | null {
  return basis.model ? llmWorstCase(prices, basis.model, basis.prompt, basis.maxTokens) : null;
}

/** What it takes for a budget to cover an operation of `need` LF now. */
export interface LifeforceNeeds {
  need: number;
  /** The smallest grant after which the balance covers it (0: it does already). */
  grant: number;
  /**
   * The smallest capacity that holds it beside what is reserved, where the capacity is below
   * that: regeneration and a new capacity fill the balance only up to the capacity, so until it
   * changes only a grant lets the operation run, once per grant. null: the capacity is enough.
   */
  capacity: number | null;
  /** The smallest daily / monthly limit that lets it through now, where the limit stands in the way (a grant does not help; a new window may). */
  daily: number | null;
  monthly: number | null;
  closed: boolean;
}

/** The grant, capacity and envelope limits that let `reserve(before, need, at)` pass (see LifeforceNeeds). */
export function lifeforceNeeds(before: BudgetState, need: number, at = before.regenAt): LifeforceNeeds {
  const b = regenerate(before, at);
  const n = lfRound(Math.max(0, need));
  const limitFor = (e: Envelope, window: string): number | null => {
    const used = e.window === window ? e.used : 0;
    return e.limit !== null && lfRound(used + n) > e.limit ? lfRound(used + n) : null;
  };
  return {
    need: n,
    grant: b.balance === null ? 0 : lfRound(Math.max(0, n - b.balance)),
    capacity: b.capacity !== null && lfRound(n + b.reserved) > b.capacity ? lfRound(n + b.reserved) : null,
    daily: limitFor(b.daily, dayWindow(at)),
    monthly: limitFor(b.monthly, monthWindow(at)),
    closed: b.closed,
  };
}

/** True when the budget covers the need now: no grant, limit or opening needed. */
export function needsMet(n: LifeforceNeeds): boolean {
  return n.grant === 0 && n.daily === null && n.monthly === null && !n.closed;
}

// ---- what the agent's config says ---------------------------------------------------------------

// In a module of their own, so that workflows can import them without this one.
export {
  budgetSettingsSchema,
  exhaustedPolicies,
  type BudgetSettingsInput,
  type ExhaustedPolicy,
} from './lifeforce-settings.js';
