/**
 * The reflexes of one tick (emotions, novelty and anti-stagnation, validation) as ONE
 * retry-safe activity: the emotion and novelty mini-prompts and every validator run in
 * parallel (a validator that times out or is down is skipped and counted), then one
 * transaction records the verdict on the tick's `llm_recent_responses` row together with
 * everything it decided (activities/reflexes/record.ts). The row's `reflexes` column is the
 * idempotency marker: a retried activity finds it and returns the stored verdict. The maths
 * lives in core/ (emotions, novelty, stagnation, validation, memory-manager).
 */
import { createHash } from 'node:crypto';
import { and, eq, inArray } from 'drizzle-orm';
import { isDestructive, minRatingFor } from '../../core/catalogue.js';
import {
  hostRuleApplies,
  parsePolicyRules,
  targetsNeeded,
  type CommandFacts,
  type EthicsPolicy,
  type TargetTable,
} from '../../core/ethics.js';
import { emotionFormatInstructions, nextAnxietyStreak, parseEmotions } from '../../core/emotions.js';
import {
  blendSimilarity,
  clauseSimilarity,
  combineNovelty,
  identicalSimilarity,
  lexicalSimilarity,
  maxSimilarity,
  noveltyFormatInstructions,
  noveltyFromSimilarity,
  parseNoveltyAnswer,
  placeholderTick,
  earlierMeaningVectors,
  meaningClauses,
  type Ideas,
} from '../../core/novelty.js';
import { clipText } from '../../core/sanitize.js';
import {
  decideStagnation,
  defaultStagnationPolicy,
  reflexLite,
  relaxReflex,
  rephrasePrompt,
} from '../../core/stagnation.js';
import {
  aggregate,
  gateCommands,
  parseValidatorAnswer,
  validationMode,
  validatorQuestion,
  type ValidatorRecord,
} from '../../core/validation.js';
import type { Db } from '../../db/client.js';
import { markEmbedderAway, markEmbedderBack } from '../../db/queries/embedder-health.js';
import {
  concepts,
  diaryEntries,
  goals,
  links,
  llmMemory,
  mcpServers,
  mcpTools,
  tasks,
  type EthicsPolicy as EthicsPolicyRow,
  type LlmRegistryEntry,
} from '../../db/schema/index.js';
import { vectorsOf } from '../embeddings/cache.js';
import { within } from '../../core/within.js';
import { ErrorType, nonRetryable } from '../errors.js';
import { rowsFor, type ChatRequest, type ChatResult } from '../llm/index.js';
import { reflexWindow } from './snapshot.js';
import { recordReflexes } from '../reflexes/record.js';
import {
  askPeerValidator,
  chosenPeerValidators,
  loadPeerValidators,
  peerValidationKey,
  peerValidatorBase,
} from '../reflexes/peers.js';
import { miniPromptMaxTokens, reflexSettings } from '../reflexes/settings.js';
import type { ReflexDeps, ReflexView, TickReflexesInput, TickReflexesResult } from '../reflexes/types.js';

export type { ReflexDeps, TickReflexesInput, TickReflexesResult } from '../reflexes/types.js';

/** sha256 of a reply: an identical reply is recognised by it and not stored again. */
const contentHashOf = (content: string) => createHash('sha256').update(content).digest('hex');

/** An active ethics_policies row as the gate and the validators read it; rules that do not parse fail closed. */
function toPolicy(e: EthicsPolicyRow): EthicsPolicy {
  const parsed = parsePolicyRules(e.rules);
  return {
    id: e.id,
    title: e.title,
    rule: e.rule,
    rationale: e.rationale,
    severity: e.severity,
    forbids: e.forbids,
    ...(parsed.ok ? { rules: parsed.rules } : { rules: [], invalid: parsed.error }),
  };
}

/** The tick's snapshot and reply (think's, on this worker; else read now, and kept for applyCommands). */
async function readView(deps: ReflexDeps, input: TickReflexesInput): Promise<ReflexView> {
  const loop = { agentId: input.agentId };
  // snapshotOf makes the tick's entry at once, so a reply replyOf reads is kept beside it.
  const [snapshot, reply] = await Promise.all([
    deps.snapshots.snapshotOf(loop, input.tick),
    deps.snapshots.replyOf(loop, input.tick, input.responseId),
  ]);
  if (!reply)
    throw nonRetryable(
      ErrorType.NotFound,
      `llm_recent_responses #${input.responseId} of ${input.agentId} does not exist`,
    );
  return {
    reply,
    previous: snapshot.previous.slice(0, reflexWindow.recent),
    real: snapshot.previous.filter((p) => placeholderTick(p.content) === null).slice(0, reflexWindow.real),
    config: snapshot.config,
    registry: snapshot.registry,
    policies: snapshot.ethics.map(toPolicy),
    peers: snapshot.peers,
    embedderAway: snapshot.embedderAway,
  };
}

/**
 * Identical = the same hash as one of the last replies, placeholders included (each carries
 * the hash of the reply it stands for), or lexically the same as a real previous reply.
 */
function identity(view: ReflexView) {
  const content = view.reply.content;
  const hash = contentHashOf(content);
  const similarity = maxSimilarity(
    content,
    view.real.map((p) => p.content),
  );
  const originalTick = (p: { tick: number; content: string }) => placeholderTick(p.content) ?? p.tick;
  const sameHash = view.previous
    .slice(0, 5)
    .find((p) => (p.contentHash ?? (placeholderTick(p.content) !== null ? null : contentHashOf(p.content))) === hash);
  const sameText = sameHash
    ? undefined
    : view.real.find((p) => lexicalSimilarity(content, p.content) >= identicalSimilarity);
  const identicalTo = sameHash ? originalTick(sameHash) : sameText ? sameText.tick : null;
  return { hash, similarity, identicalTo };
}

/** An embedder slower than this is away for the tick. */
const embedTimeoutMs = 15_000;

type Meaning = { ok: true; similarity: number } | { ok: false; reason: string };

/**
 * The reply's similarity by meaning to the real previous replies (core/novelty.ts
 * clauseSimilarity), through the agent's embedder and the embeddings cache (each text embedded
 * once); null where the worker has no embedders or the agent turned semantic memory off. Never
 * throws: an embedder that is away, throws, hangs or returns vectors of the wrong size gives the
 * reason, and its health entry is opened; one that answers closes it.
 */
async function meaningSimilarity(
  deps: ReflexDeps,
  input: TickReflexesInput,
  view: ReflexView,
): Promise<Meaning | null> {
  if (!deps.embedders) return null;
  const away = async (reason: string): Promise<Meaning> => {
    await markEmbedderAway(deps.db, input.agentId, reason, new Date(), input.tick).catch(() => undefined);
    return { ok: false, reason: `embedder away: ${reason}` };
  };
  let choice;
  try {
    choice = await deps.embedders.forAgent(deps.db, input.agentId, view);
  } catch (err) {
    return away(clipText((err as Error).message ?? String(err), 200));
  }
  if (!choice.ok) return choice.why === 'off' ? null : away(clipText(choice.reason, 200));
  // The reply's clauses and the earlier replies' (cached: each was embedded at its own tick); an
  // earlier reply is compared as its vector (the mean of its clauses') and its clauses.
  const clauses = meaningClauses(view.reply.content);
  const earlier = view.real.map((p) => meaningClauses(p.content));
  try {
    const vectors = await within(
      vectorsOf(deps.db, choice.embedder, [...clauses, ...earlier.flat()]),
      embedTimeoutMs,
      () => new Error(`no answer in ${embedTimeoutMs / 1000} s`),
    );
    let at = clauses.length;
    const previous = earlier.flatMap((texts) => earlierMeaningVectors(vectors.slice(at, (at += texts.length))));
    const similarity = clauseSimilarity(vectors.slice(0, clauses.length), previous);
    if (view.embedderAway) await markEmbedderBack(deps.db, input.agentId, new Date()).catch(() => undefined);
    return { ok: true, similarity };
  } catch (err) {
    return away(`${choice.name}: ${clipText((err as Error).message ?? String(err), 200)}`);
  }
}

type Preloaded = NonNullable<ChatRequest['preloaded']>;
const keyOf = (input: TickReflexesInput, purpose: string, validatorId?: number) =>
  `${input.workflowId}:${input.tick}:${purpose}${validatorId !== undefined ? `:${validatorId}` : ''}`;

/** The dedicated role's rows if the agent has any; else the LLM that wrote the reply. */
function route(
  registry: LlmRegistryEntry[],
  role: 'emotion' | 'novelty',
  ownId: number | null,
): { role: 'emotion' | 'novelty' | 'agent'; registryId?: number } {
  if (rowsFor(registry, role).length > 0) return { role };
  return ownId !== null ? { role: 'agent', registryId: ownId } : { role: 'agent' };
}

/** The emotion and novelty mini-prompts and every validator, in parallel (heartbeating meanwhile). */
async function askAll(
  deps: ReflexDeps,
  input: TickReflexesInput,
  view: ReflexView,
  identical: boolean,
  malformed: string[],
) {
  const { llm } = deps;
  const validatorTimeoutMs = deps.validatorTimeoutMs ?? 10_000;
  const validatorRows = rowsFor(view.registry, 'validator');
  const chosenPeers = chosenPeerValidators(view.config, view.peers);
  // One query for the earlier answers to this tick's keys: a retried activity pays no call twice.
  // The peer validators' models are read beside it.
  const [previous, peerValidators] = await Promise.all([
    llm.previousCalls([
      keyOf(input, 'emotion'),
      keyOf(input, 'novelty'),
      ...validatorRows.map((v) => keyOf(input, 'validate', v.id)),
      ...chosenPeers.map((p) => peerValidationKey(input, p.peerAgentId)),
    ]),
    loadPeerValidators(llm, chosenPeers),
  ]);
  const preloaded: Preloaded = { registry: view.registry, previous };
  const ask = (
    purpose: string,
    role: 'emotion' | 'novelty' | 'validator' | 'agent',
    content: string,
    registryId?: number,
    signal?: AbortSignal,
  ) =>
    llm.chat({
      preloaded,
      agentId: input.agentId,
      role,
      messages: [{ role: 'user', content }],
      params: { maxTokens: miniPromptMaxTokens[purpose] ?? 64, temperature: 0.2 },
      tick: input.tick,
      workflowId: input.workflowId,
      purpose,
      idempotencyKey: keyOf(input, purpose, role === 'validator' ? registryId : undefined),
      ...(registryId !== undefined ? { registryId } : {}),
      ...(signal ? { signal } : {}),
    });
  const { content, llmRegistryId: ownId } = view.reply;
  const { known } = reflexSettings(view.config);
  const emotionTask = (async () => {
    try {
      const how = route(view.registry, 'emotion', ownId);
      const r = await ask(
        'emotion',
        how.role,
        `Reply:\n"""\n${clipText(content, 4000)}\n"""\n\n${emotionFormatInstructions(known)}`,
        how.registryId,
      );
      return parseEmotions(r.text, known);
    } catch (err) {
      malformed.push(`emotion: ${clipText((err as Error).message, 200)}`);
      return null;
    }
  })();
  const noveltyTask = (async () => {
    if (view.real.length === 0 || identical) return null;
    try {
      const how = route(view.registry, 'novelty', ownId);
      const prev = view.real.map((p) => `[tick ${p.tick}] ${clipText(p.content, 800)}`).join('\n');
      const r = await ask(
        'novelty',
        how.role,
        `PREVIOUS replies:\n${prev}\n\nNEW reply:\n${clipText(content, 2000)}\n\n${noveltyFormatInstructions}`,
        how.registryId,
      );
      return parseNoveltyAnswer(r.text);
    } catch (err) {
      return { ok: false as const, error: clipText((err as Error).message, 200) };
    }
  })();
  // The validators rate the reply against the agent's policies, not only the universal question.
  const question = validatorQuestion(clipText(content, 6000), view.policies);
  // One validator's answer (a registry row, or a peer agent's model) as its record; never throws.
  const rate = async (
    base: Omit<ValidatorRecord, 'status'>,
    call: (signal: AbortSignal) => Promise<ChatResult>,
  ): Promise<ValidatorRecord> => {
    const started = performance.now();
    try {
      const r = await call(AbortSignal.timeout(validatorTimeoutMs));
      const latencyMs = r.replayed ? r.latencyMs : Math.round(performance.now() - started);
      const a = parseValidatorAnswer(r.text);
      if (!a.ok) return { ...base, status: 'malformed', comment: clipText(a.error, 100), latencyMs };
      return { ...base, status: 'ok', rating: a.rating, ...(a.comment ? { comment: a.comment } : {}), latencyMs };
    } catch (err) {
      const msg = `${(err as Error).name ?? ''} ${(err as Error).message ?? err}`;
      const latencyMs = Math.round(performance.now() - started);
      return {
        ...base,
        status: /timed out|timeout|abort/i.test(msg) ? 'timeout' : 'error',
        comment: clipText(msg.trim(), 100),
        latencyMs,
      };
    }
  };
  const validatorTasks = [
    ...validatorRows.map((v) => {
      const self = ownId !== null && v.id === ownId;
      return rate({ registryId: v.id, name: v.name, trust: v.trust, ...(self ? { self } : {}) }, (signal) =>
        ask('validate', 'validator', question, v.id, signal),
      );
    }),
    ...peerValidators.map((v) =>
      rate(peerValidatorBase(v), (signal) => askPeerValidator(llm, input, v, question, previous, signal)),
    ),
  ];
  const [emo, nov, records] = await Promise.all([emotionTask, noveltyTask, Promise.all(validatorTasks)]);
  return { emo, nov, records, validatorRows };
}

/**
 * Whether each `tools.mcp` call a host rule applies to is of an open-world tool (MCP's
 * `openWorldHint`, true unless the server says false; a tool the agent does not have counts as
 * open-world: its handler refuses it anyway). One query, only when such a rule exists.
 */
async function openWorldFacts(
  db: Db,
  agentId: string,
  commands: ReadonlyArray<{ cmdId: string; type: string; args?: Record<string, unknown> }>,
  policies: readonly EthicsPolicy[],
): Promise<Record<string, CommandFacts>> {
  const calls = commands.filter((c) => c.type === 'tools.mcp' && hostRuleApplies(policies, c));
  if (calls.length === 0) return {};
  const rows = await db
    .select({ server: mcpServers.name, tool: mcpTools.name, annotations: mcpTools.annotations })
    .from(mcpTools)
    .innerJoin(mcpServers, eq(mcpServers.id, mcpTools.serverId))
    .where(eq(mcpTools.agentId, agentId));
  const closed = new Set(rows.filter((r) => r.annotations.openWorldHint === false).map((r) => `${r.server}.${r.tool}`));
  return Object.fromEntries(
    calls.map((c) => [c.cmdId, { openWorld: !closed.has(`${String(c.args?.server)}.${String(c.args?.tool)}`) }]),
  );
}

/** The facts of the rows some commands act on, by cmd_id; a row that is not there (or not the agent's) is `target: null`. */
async function targetFacts(
  db: Db,
  agentId: string,
  needed: ReadonlyArray<{ cmdId: string; table: TargetTable; id: number }>,
): Promise<Record<string, CommandFacts>> {
  if (needed.length === 0) return {};
  const tables = { diary_entries: diaryEntries, llm_memory: llmMemory, concepts, links, goals, tasks } as const;
  const found = new Map<string, Record<string, unknown>>();
  await Promise.all(
    [...new Set(needed.map((n) => n.table))].map(async (name) => {
      const t = tables[name];
      const ids = [...new Set(needed.filter((n) => n.table === name).map((n) => n.id))];
      const rows = (await db
        .select()
        .from(t)
        .where(and(eq(t.agentId, agentId), inArray(t.id, ids)))) as Array<Record<string, unknown>>;
      for (const r of rows) found.set(`${name}#${String(r.id)}`, r);
    }),
  );
  const out: Record<string, CommandFacts> = {};
  for (const n of needed) {
    const r = found.get(`${n.table}#${n.id}`);
    out[n.cmdId] = {
      target: r
        ? {
            exists: true,
            source: r.source ?? 'agent',
            pinned: r.pinned,
            tags: r.tags,
            priority: r.priority,
            title: r.title ?? r.name,
            status: r.status,
          }
        : null,
    };
  }
  return out;
}

/** Emotions, novelty and anti-stagnation, validation for one tick of the main loop; idempotent on the response row. */
export async function tickReflexes(deps: ReflexDeps, input: TickReflexesInput): Promise<TickReflexesResult> {
  const view = await readView(deps, input);
  if (view.reply.reflexes) return view.reply.reflexes as TickReflexesResult;
  const settings = reflexSettings(view.config);
  const { hash, similarity, identicalTo } = identity(view);
  const identical = identicalTo !== null;
  const malformed: string[] = [];
  const reflexNotes: string[] = [];
  // The comparison by meaning runs beside the mini-prompts (none when nothing came before).
  const [{ emo, nov, records, validatorRows }, meaning] = await Promise.all([
    askAll(deps, input, view, identical, malformed),
    identical || view.real.length === 0 ? null : meaningSimilarity(deps, input, view),
  ]);
  const ownId = view.reply.llmRegistryId;

  // ---- emotions ----
  const emotions = emo?.readings ?? [];
  if (emo?.malformed.length) malformed.push(...emo.malformed.map((m) => `emotion item: ${m}`));
  const anxietyStreak = nextAnxietyStreak(input.stagnation.anxietyStreak, emotions, settings.anxietyThreshold);

  // ---- novelty ----
  // By meaning and words where the agent's embedder answered; else by words alone, as told.
  const blended = meaning?.ok ? blendSimilarity(meaning.similarity, similarity) : null;
  if (meaning && !meaning.ok) reflexNotes.push(`novelty by words only: ${meaning.reason}`);
  const lexical = view.real.length === 0 ? 100 : noveltyFromSimilarity(blended ?? similarity);
  if (nov && !nov.ok) malformed.push(`novelty: ${nov.error}`);
  const novelty = identical ? 0 : combineNovelty(lexical, nov?.ok ? nov.novelty : null, similarity);
  const ideas: Ideas = nov?.ok ? nov.ideas : { new: [], refined: [], discarded: [] };

  // ---- validation ----
  // Every validator asked counts (registry rows and peers), answered or not.
  const mode = validationMode([
    ...validatorRows.map((v) => ({ self: ownId !== null && v.id === ownId })),
    ...records.filter((r) => r.peer !== undefined),
  ]);
  const answered = records.filter((r) => r.status === 'ok' && r.rating !== undefined);
  const agg = aggregate(answered.map((r) => ({ id: r.registryId, rating: r.rating!, trust: r.trust, self: r.self })));
  // Rules that read the row a command acts on (was this entry the user's?) get its facts first.
  const facts = await targetFacts(deps.db, input.agentId, targetsNeeded(input.commands, view.policies));
  for (const [cmdId, f] of Object.entries(await openWorldFacts(deps.db, input.agentId, input.commands, view.policies)))
    facts[cmdId] = { ...facts[cmdId], ...f };
  const gate = gateCommands(
    input.commands,
    { mode, rating: mode === 'auto_pass' ? null : agg.rating, blocked: agg.blocked },
    minRatingFor,
    view.policies,
    {
      facts,
      destructive: isDestructive,
      autoPassDestructive: settings.autoPassDestructive,
    },
  );
  const validatorTimeouts = records.filter((r) => r.status === 'timeout').length;
  const validatorFailures = records.filter((r) => r.status !== 'ok').length;
  for (const r of records)
    if (r.status === 'malformed') malformed.push(`validator ${r.name}: ${r.comment ?? 'malformed answer'}`);
  if (validatorTimeouts) reflexNotes.push(`${validatorTimeouts} validator(s) timed out and were skipped`);
  if (agg.blocked) reflexNotes.push('validators tied at equal trust: commands blocked');

  // ---- anti-stagnation ----
  const policy = {
    ...defaultStagnationPolicy,
    lowNovelty: Math.round(settings.noveltyThreshold * 100),
    anxietyTicks: settings.anxietyTicks,
  };
  const decision = decideStagnation(input.stagnation, input.tick, novelty, anxietyStreak, policy);
  let params = input.params;
  let focus: string | null = null;
  const actions: string[] = [];
  if (identical) actions.push('identical_reply_not_stored');
  if (decision.reflexLite) {
    params = reflexLite(params);
    focus = rephrasePrompt;
    actions.push(anxietyStreak >= policy.anxietyTicks && !decision.stagnant ? 'reflex_lite:anxiety' : 'reflex_lite');
  } else if (decision.relax) {
    params = relaxReflex(params, input.defaults);
    actions.push('relax');
  }

  const { result, recorded } = await recordReflexes(deps, input, view, {
    verdict: {
      validationMode: mode,
      rating: mode === 'auto_pass' ? null : agg.rating,
      ...(mode === 'auto_pass' && Object.keys(gate.held).length === 0 ? {} : { allowedCmdIds: gate.allowed }),
      held: gate.held,
      notes: reflexNotes,
      novelty,
      identical,
      emotions,
      params,
      focus,
      actions,
      validatorTimeouts,
      validatorFailures,
      malformed,
    },
    stagnation: { decision, policy, anxietyStreak, similarity: blended ?? similarity },
    validation: { agg, records, answered },
    reply: { hash, identicalTo, ideas, tags: nov?.ok ? nov.tags : view.reply.tags, newEmotions: emo?.unknown ?? [] },
  });
  // Told once, by the attempt that recorded the verdict (a retry finds it and tells nobody again).
  if (recorded) {
    deps.events?.event(input.agentId, 'verdict', {
      tick: input.tick,
      validationMode: result.validationMode,
      rating: result.rating,
      notes: [...result.notes, ...Object.entries(result.held).map(([cmdId, why]) => `held ${cmdId}: ${why}`)],
    });
  }
  return result;
}

/** The tick's reflexes as an activity, built from a database, an LLM router and the tick snapshots. */
export function createTickReflexActivities(deps: ReflexDeps) {
  return {
    /** Emotions, novelty and anti-stagnation, validation for one tick of the main loop; idempotent on the response row. */
    tickReflexes: (input: TickReflexesInput) => tickReflexes(deps, input),
  };
}
