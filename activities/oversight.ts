/**
 * The oversight tier and the escalation's database side. The oversight is a
 * LangGraph StateGraph run inside ONE activity that heartbeats: a router node sends the
 * escalation by category to a sub-agent node (statistics, code, visualization,
 * state_machine_designer, general); each calls the `oversight` role through the LLM router
 * (so calls are accounted in llm_calls and replayed on retry) and returns a zod-validated
 * answer. The other activities keep escalations, decision_log, partnership_messages, notes
 * and discovered_tools in step; each is idempotent (keys, upserts) so retries are safe.
 */
import { Annotation, END, START, StateGraph } from '@langchain/langgraph';
import { ApplicationFailure, Context } from '@temporalio/activity';
import { and, eq, inArray, like, or, sql } from 'drizzle-orm';
import {
  grantAfterEscalations,
  oversightAnswerJsonSchema,
  oversightPrompt,
  parseOversightAnswer,
  subAgentBriefs,
  type EscalationCategory,
  type OversightAnswer,
  type ParsedEscalationInput,
  type Proposal,
  type ToolDesign,
} from '../core/escalation.js';
import type { Decider, HumanVerdict, Outcome } from '../core/escalation-rules.js';
import { agentShard } from '../core/learnings.js';
import type { Db } from '../db/client.js';
import { decisionLog, discoveredTools, escalations, llmRegistry, notes, partnershipMessages, toolRegistry } from '../db/schema/index.js';
import { ErrorType, nonRetryable } from './errors.js';
import { LearningRefusedError, recordFeedback, saveLearning, type FeedbackResult } from '../db/queries/learnings.js';
import { defaultLocalModelName, LlmUnavailableError, type LlmRouter } from './llm/index.js';

/**
 * An agent with no `oversight` row gets the local model for that role (offline default; a
 * deployment registers a larger model, tests a scripted one). Idempotent.
 */
export async function ensureOversightModel(db: Db, agentId: string): Promise<{ created: boolean }> {
  const [row] = await db.select({ id: llmRegistry.id }).from(llmRegistry).where(and(eq(llmRegistry.agentId, agentId), eq(llmRegistry.role, 'oversight'))).limit(1);
  if (row) return { created: false };
  const inserted = await db
    .insert(llmRegistry)
    .values({ agentId, name: 'default-oversight', provider: 'local', model: defaultLocalModelName, role: 'oversight', priority: 100, tier: 'small', params: { temperature: 0.2, maxTokens: 512 } })
    .onConflictDoNothing()
    .returning({ id: llmRegistry.id });
  return { created: inserted.length > 0 };
}

export const OversightErrorType = { MalformedReply: 'MalformedOversightReply' } as const;

export interface OversightDeps {
  db: Db;
  llm: LlmRouter;
  /** Heartbeat period while the graph runs (default 2 s, under the LLM preset's 10 s). */
  heartbeatMs?: number;
  /** Attempts per sub-agent at a well-formed answer before MalformedOversightReply. */
  attempts?: number;
}

/** What the graph returns: the route it took and the validated answer. */
export interface OversightRun {
  route: EscalationCategory;
  answer: OversightAnswer;
  /** llm_calls rows of the answer (and of malformed attempts). */
  callIds: number[];
}

type GraphInput = { escalation: ParsedEscalationInput; feedback?: string; round: number; key: string; catalogue: string[] };

const OversightState = Annotation.Root({
  input: Annotation<GraphInput>(),
  route: Annotation<EscalationCategory>(),
  answer: Annotation<OversightAnswer>(),
  callIds: Annotation<number[]>({ reducer: (a, b) => a.concat(b), default: () => [] }),
});

/** The oversight graph: router → one sub-agent per category → END. */
export function buildOversightGraph(deps: OversightDeps, signal?: AbortSignal) {
  const attempts = deps.attempts ?? 2;
  const subAgent = (category: EscalationCategory) => async (s: typeof OversightState.State) => {
    const { escalation, feedback, round, key, catalogue } = s.input;
    const messages = [
      { role: 'system' as const, content: subAgentBriefs[category] },
      { role: 'user' as const, content: oversightPrompt(escalation, { feedback, round, catalogue }) },
    ];
    const callIds: number[] = [];
    let last = '';
    for (let attempt = 1; attempt <= attempts; attempt++) {
      const r = await deps.llm.chat({
        agentId: escalation.agentId,
        role: 'oversight',
        messages: attempt === 1 ? messages : [...messages, { role: 'user', content: `Your previous answer was invalid (${last}). Answer again with the JSON object only.` }],
        params: { jsonSchema: oversightAnswerJsonSchema, temperature: 0.2 },
        // Per attempt: a retried activity replays each stored reply instead of paying again.
        idempotencyKey: `${key}/r${round}/${category}/a${attempt}`,
        purpose: `oversight:${category}`,
        tick: escalation.tick,
        signal,
      });
      callIds.push(r.callId);
      const parsed = parseOversightAnswer(r.text);
      if (parsed.ok) return { route: category, answer: parsed.answer, callIds };
      last = parsed.message;
    }
    throw ApplicationFailure.create({
      type: OversightErrorType.MalformedReply,
      nonRetryable: true,
      message: `oversight ${category}: no well-formed answer after ${attempts} attempts: ${last}`,
      details: [{ callIds }],
    });
  };
  return new StateGraph(OversightState)
    .addNode('router', (s: typeof OversightState.State) => ({ route: s.input.escalation.category }))
    .addNode('statistics', subAgent('statistics'))
    .addNode('code', subAgent('code'))
    .addNode('visualization', subAgent('visualization'))
    .addNode('state_machine_designer', subAgent('state_machine_designer'))
    .addNode('general', subAgent('general'))
    .addEdge(START, 'router')
    .addConditionalEdges('router', (s: typeof OversightState.State) => s.route, ['statistics', 'code', 'visualization', 'state_machine_designer', 'general'])
    .addEdge('statistics', END)
    .addEdge('code', END)
    .addEdge('visualization', END)
    .addEdge('state_machine_designer', END)
    .addEdge('general', END)
    .compile();
}

function activityContext(): Context | undefined {
  try {
    return Context.current();
  } catch {
    return undefined;
  }
}

type Tx = Parameters<Parameters<Db['transaction']>[0]>[0];

async function message(tx: Db | Tx, m: typeof partnershipMessages.$inferInsert & { idempotencyKey: string }): Promise<void> {
  await tx.insert(partnershipMessages).values(m).onConflictDoNothing({ target: partnershipMessages.idempotencyKey });
}

const escalationStatusOf = (outcome: Outcome, decidedBy: Decider) => (outcome === 'denied' ? (decidedBy === 'default' ? 'timed_out' : 'rejected') : 'resolved');

/** Oversight and escalation activities for the `mindloop` queue. */
export function createOversightActivities(deps: OversightDeps) {
  const { db } = deps;

  return {
    /** Insert the escalation, its decision_log row and the agent's question (idempotent by escalation id). */
    async openEscalation(input: { escalation: ParsedEscalationInput; workflowId: string; deadlineAt: string | null }): Promise<{ created: boolean }> {
      const e = input.escalation;
      return db.transaction(async (tx) => {
        const [row] = await tx
          .insert(escalations)
          .values({ id: e.escalationId, agentId: e.agentId, task: e.task, category: e.category, context: e.context, whatITried: e.whatITried || null, status: 'in_progress', workflowId: input.workflowId, deadlineAt: input.deadlineAt ? new Date(input.deadlineAt) : null })
          .onConflictDoNothing({ target: escalations.id })
          .returning({ id: escalations.id });
        if (!row) {
          const [existing] = await tx.select({ agentId: escalations.agentId }).from(escalations).where(eq(escalations.id, e.escalationId));
          if (existing && existing.agentId !== e.agentId) throw nonRetryable(ErrorType.Forbidden, `escalation '${e.escalationId}' belongs to agent '${existing.agentId}'`);
          return { created: false };
        }
        await tx.insert(decisionLog).values({
          agentId: e.agentId,
          tick: e.tick ?? null,
          proposal: { task: e.task, category: e.category, ...(e.proposal ? { action: e.proposal } : {}) },
          dangerFlags: e.dangerFlags,
          escalationId: e.escalationId,
          outcome: e.humanRequired ? 'waiting' : 'pending',
        });
        await message(tx, { agentId: e.agentId, fromTier: 'agent', toTier: 'oversight', kind: 'question', body: e.task, escalationId: e.escalationId, metadata: { category: e.category, whatITried: e.whatITried, dangerFlags: e.dangerFlags }, idempotencyKey: `${e.escalationId}:question` });
        return { created: true };
      });
    },

    /**
     * Run the oversight graph for one escalation (one design round). Heartbeats while the
     * sub-agent thinks. No oversight model → `LlmUnavailable` (the workflow falls back to the human).
     */
    async runOversight(input: { escalation: ParsedEscalationInput; round: number; feedback?: string; key: string }): Promise<OversightRun> {
      const ctx = activityContext();
      const beat = ctx ? setInterval(() => ctx.heartbeat({ round: input.round }), deps.heartbeatMs ?? 2_000) : undefined;
      try {
        await ensureOversightModel(db, input.escalation.agentId);
        const catalogue = (await db.select({ name: toolRegistry.name }).from(toolRegistry).where(eq(toolRegistry.status, 'active'))).map((r) => r.name);
        const graph = buildOversightGraph(deps, ctx?.cancellationSignal);
        const out = await graph.invoke({ input: { ...input, catalogue } });
        return { route: out.route, answer: out.answer, callIds: out.callIds };
      } catch (err) {
        if (err instanceof LlmUnavailableError) throw nonRetryable(ErrorType.LlmUnavailable, err.message);
        throw err;
      } finally {
        clearInterval(beat);
      }
    },

    /** Keep the oversight's answer (advice until the rules make it the decision). */
    async recordOversightAnswer(input: { escalationId: string; agentId: string; run: OversightRun; round: number; awaitingHuman: boolean }): Promise<void> {
      const { answer } = input.run;
      await db.transaction(async (tx) => {
        await tx
          .update(escalations)
          .set({ solution: answer.solution, teachingMoment: answer.teaching_moment, status: input.awaitingHuman ? 'awaiting_human' : 'in_progress' })
          .where(eq(escalations.id, input.escalationId));
        await tx.update(decisionLog).set({ oversightAnswer: answer.verdict, oversightComment: answer.comment ?? (answer.verdict === 'approve' ? null : answer.teaching_moment) }).where(eq(decisionLog.escalationId, input.escalationId));
        await message(tx, {
          agentId: input.agentId,
          fromTier: 'oversight',
          toTier: input.awaitingHuman ? 'human' : 'agent',
          kind: input.awaitingHuman ? 'review_request' : 'answer',
          body: answer.solution,
          escalationId: input.escalationId,
          metadata: { route: input.run.route, verdict: answer.verdict, round: input.round, recommended: answer.recommended_tools, callIds: input.run.callIds },
          idempotencyKey: `${input.escalationId}:oversight:r${input.round}`,
        });
      });
    },

    /**
     * The workflow now waits for a human who was not required at the start (the oversight
     * asked for one, or failed): the escalation gets its deadline and the awaiting status.
     * A deadline already set is kept (idempotent).
     */
    async markAwaitingHuman(input: { escalationId: string; deadlineAt: string }): Promise<void> {
      await db
        .update(escalations)
        .set({ deadlineAt: sql`coalesce(${escalations.deadlineAt}, ${new Date(input.deadlineAt).toISOString()}::timestamptz)`, status: 'awaiting_human' })
        .where(and(eq(escalations.id, input.escalationId), inArray(escalations.status, ['open', 'in_progress', 'awaiting_human'])));
    },

    /** A design round's test result, kept in the conversation (the feedback of a failed round goes back for v2). */
    async recordDesignRound(input: { escalationId: string; agentId: string; round: number; ok: boolean; feedback: string; toolName: string }): Promise<void> {
      await message(db, { agentId: input.agentId, fromTier: 'agent', toTier: 'oversight', kind: input.ok ? 'design_passed' : 'design_failed', body: input.feedback, escalationId: input.escalationId, metadata: { round: input.round, tool: input.toolName }, idempotencyKey: `${input.escalationId}:design:r${input.round}` });
    },

    /** A human's answer, as it arrived (append-only); the decision is made by the workflow's rules. */
    async recordHumanAnswer(input: { escalationId: string; agentId: string; verdict: HumanVerdict; by: string; comment?: string; updateId: string }): Promise<void> {
      await db.transaction(async (tx) => {
        await tx.update(decisionLog).set({ humanAnswer: input.verdict, humanComment: input.comment ?? null }).where(eq(decisionLog.escalationId, input.escalationId));
        await message(tx, { agentId: input.agentId, fromTier: 'human', toTier: 'oversight', kind: input.verdict, body: input.comment ?? input.verdict, escalationId: input.escalationId, metadata: { by: input.by }, idempotencyKey: `${input.escalationId}:human:${input.updateId}` });
      });
    },

    /** A design that passed its tests and was approved joins the catalogue, discovered by its agent (via design). */
    async registerDesignedTool(input: { agentId: string; escalationId: string; design: ToolDesign; rounds: number }): Promise<{ toolId: number; version: number }> {
      const { spec } = input.design;
      return db.transaction(async (tx) => {
        const [existing] = await tx.select().from(toolRegistry).where(eq(toolRegistry.name, spec.name)).for('update');
        if (existing && existing.kind !== 'designed') throw nonRetryable(ErrorType.Forbidden, `tool name '${spec.name}' belongs to a ${existing.kind} tool`);
        const values = { description: spec.description, capability: `state_machine.${spec.name}`, implementation: input.design.implementation, tests: input.design.tests, status: 'active' as const, spec: {
            states: Object.keys(spec.states),
            initial: spec.initial,
            transitions: Object.fromEntries(Object.entries(spec.states).map(([st, d]) => [st, Object.keys(d.actions)])),
            machine: spec,
            design: { rounds: input.rounds, firstTry: input.rounds === 1, escalationId: input.escalationId },
          },
        };
        let row: { id: number; version: number } | undefined;
        if (!existing) {
          [row] = await tx.insert(toolRegistry).values({ name: spec.name, kind: 'designed', createdBy: 'oversight', ...values }).returning({ id: toolRegistry.id, version: toolRegistry.version });
        } else if (existing.implementation !== input.design.implementation || existing.tests !== input.design.tests) {
          [row] = await tx.update(toolRegistry).set({ ...values, version: sql`${toolRegistry.version} + 1` }).where(eq(toolRegistry.id, existing.id)).returning({ id: toolRegistry.id, version: toolRegistry.version });
        } else row = { id: existing.id, version: existing.version }; // a retry
        await tx.insert(discoveredTools).values({ agentId: input.agentId, toolId: row!.id, via: 'design', escalationId: input.escalationId }).onConflictDoNothing();
        return { toolId: row!.id, version: row!.version };
      });
    },

    /**
     * Settle the escalation: its row, the decision_log outcome, tools granted (recommended
     * ones that exist, plus a category's tools after `grantAfterEscalations` escalations),
     * the answer to the agent as a partnership message AND an incoming note, and for a nudge
     * a learning moment (a learning through the store; refused → kept in decision_log).
     */
    async finishEscalation(input: {
      escalationId: string;
      agentId: string;
      category: EscalationCategory;
      outcome: Outcome;
      decidedBy: Decider;
      why: string;
      answer: OversightAnswer | null;
      human: { verdict: HumanVerdict; by: string; comment?: string } | null;
      /** The held action, if any, and what happened to it. */
      proposal?: Proposal;
      proposalOutcome?: 'executed' | 'blocked' | 'failed';
      proposalResult?: string;
      designedTool?: string;
    }): Promise<{ grantedTools: string[]; noteId: number; learning: { id: number } | { refused: string } | null; feedback: FeedbackResult | { refused: string } | null }> {
      const { agentId, escalationId, outcome, answer } = input;
      const granted = await db.transaction(async (tx) => {
        // Grants: only with an answer that is not a denial.
        const grants: Array<{ id: number; name: string }> = [];
        let grantReason = '';
        if (outcome !== 'denied') {
          const names = answer?.recommended_tools ?? [];
          if (names.length) {
            grants.push(...(await tx.select({ id: toolRegistry.id, name: toolRegistry.name }).from(toolRegistry).where(and(inArray(toolRegistry.name, names), eq(toolRegistry.status, 'active')))));
          }
          const [{ n } = { n: 0 }] = await tx.select({ n: sql<number>`count(*)::int` }).from(escalations).where(and(eq(escalations.agentId, agentId), eq(escalations.category, input.category)));
          if (n >= grantAfterEscalations) {
            const byCategory = await tx
              .select({ id: toolRegistry.id, name: toolRegistry.name })
              .from(toolRegistry)
              .where(and(eq(toolRegistry.status, 'active'), or(eq(toolRegistry.capability, input.category), like(toolRegistry.capability, `${input.category}.%`))));
            const fresh = byCategory.filter((t) => !grants.some((g) => g.id === t.id));
            if (fresh.length) grantReason = `you escalated ${input.category} ${n} times: granting ${fresh.map((t) => t.name).join(', ')}`;
            grants.push(...fresh);
          }
        }
        const newly: string[] = [];
        for (const t of grants) {
          const [row] = await tx.insert(discoveredTools).values({ agentId, toolId: t.id, via: 'escalation', escalationId }).onConflictDoNothing().returning({ id: discoveredTools.id });
          if (row) newly.push(t.name);
        }
        const [prior] = await tx.select({ grantedTools: escalations.grantedTools, resolvedAt: escalations.resolvedAt }).from(escalations).where(eq(escalations.id, escalationId));
        const grantedTools = prior?.grantedTools.length ? prior.grantedTools : newly; // a retry keeps the first list
        await tx
          .update(escalations)
          .set({ status: escalationStatusOf(outcome, input.decidedBy), decidedBy: input.decidedBy, grantedTools, resolvedAt: new Date() })
          .where(eq(escalations.id, escalationId));
        await tx
          .update(decisionLog)
          .set({ outcome: input.proposalOutcome ?? (outcome === 'denied' ? 'blocked' : 'executed'), ...(input.human ? { humanAnswer: input.human.verdict, humanComment: input.human.comment ?? null } : {}) })
          .where(eq(decisionLog.escalationId, escalationId));
        return { grantedTools, grantReason, firstFinish: !prior?.resolvedAt };
      });

      const fromTier = input.decidedBy === 'human' ? 'human' : 'oversight';
      const verdictText = outcome === 'approved' ? 'approved' : outcome === 'nudged' ? 'nudged' : 'denied';
      const lines = [`Escalation ${escalationId} (${input.category}): ${verdictText} by ${input.decidedBy} — ${input.why}.`];
      if (input.human?.comment) lines.push(`Human: ${input.human.comment}`);
      if (answer && outcome !== 'denied') lines.push(`Solution: ${answer.solution}`, `Teaching moment: ${answer.teaching_moment}`);
      if (input.proposalOutcome) lines.push(`Your proposed action: ${input.proposalOutcome}${input.proposalResult ? ` — ${input.proposalResult}` : ''}.`);
      if (input.designedTool) lines.push(`New tool in your catalogue: ${input.designedTool}.`);
      if (granted.grantReason) lines.push(granted.grantReason);
      else if (granted.grantedTools.length) lines.push(`Tools granted: ${granted.grantedTools.join(', ')}.`);
      const body = lines.join('\n');

      const noteId = await db.transaction(async (tx) => {
        await message(tx, { agentId, fromTier, toTier: 'agent', kind: outcome === 'approved' ? 'approval' : outcome === 'nudged' ? 'nudge' : input.human?.verdict === 'veto' ? 'veto' : 'rejection', body, escalationId, metadata: { decidedBy: input.decidedBy, grantedTools: granted.grantedTools }, idempotencyKey: `${escalationId}:answer` });
        if (answer && outcome !== 'denied') {
          await message(tx, { agentId, fromTier: 'oversight', toTier: 'agent', kind: 'teaching', body: answer.teaching_moment, escalationId, idempotencyKey: `${escalationId}:teaching` });
        }
        const [n] = await tx
          .insert(notes)
          .values({ agentId, direction: 'in', source: fromTier, sender: input.decidedBy === 'human' ? (input.human?.by ?? 'human') : 'oversight', priority: 5, tags: ['escalation', input.category], text: body, idempotencyKey: `${escalationId}:note` })
          .onConflictDoNothing({ target: notes.idempotencyKey })
          .returning({ id: notes.id });
        if (n) return n.id;
        const [found] = await tx.select({ id: notes.id }).from(notes).where(eq(notes.idempotencyKey, `${escalationId}:note`));
        return found!.id;
      });

      let learning: { id: number } | { refused: string } | null = null;
      if (outcome === 'nudged') {
        const hint = input.human?.verdict === 'nudge' ? (input.human.comment ?? '') : (answer?.comment ?? answer?.teaching_moment ?? '');
        try {
          // The autopoiesis store's guard decides whether a `nudge` learning is allowed.
          const r = await saveLearning(db, { shardType: agentShard(agentId), predicate: 'nudge', args: { category: input.category, hint: hint.slice(0, 200) }, source: `escalation/${escalationId}`, agentId });
          learning = { id: r.id };
        } catch (err) {
          learning = { refused: (err as Error).message };
          // Refused by the store's guards (rate limit, cap, an empty hint): kept as a learning moment in the decision log.
          await db
            .update(decisionLog)
            .set({ oversightComment: sql`coalesce(${decisionLog.oversightComment}, '') || ${`\n[learning moment] ${hint} (learning store: ${(err as Error).message})`}` })
            .where(and(eq(decisionLog.escalationId, escalationId), sql`position('[learning moment]' in coalesce(${decisionLog.oversightComment}, '')) = 0`));
        }
      }
      // A human who rejects or vetoes the agent's held action is feedback, like `mindloop
      // feedback <agent> reject <action> --reason …` (counted once: a retried finish skips it).
      let feedback: FeedbackResult | { refused: string } | null = null;
      const rejected = input.human && (input.human.verdict === 'reject' || input.human.verdict === 'veto');
      if (input.proposal && rejected && granted.firstFinish) {
        const action = (input.proposal.kind === 'tool' ? `tool.${input.proposal.name.split('.', 1)[0]}` : input.proposal.name).toLowerCase();
        try {
          feedback = await recordFeedback(db, { agentId, kind: 'reject', action, ...(input.human?.comment ? { reason: input.human.comment.slice(0, 500) } : {}), source: `escalation/${escalationId}` });
        } catch (err) {
          if (!(err instanceof LearningRefusedError)) throw err;
          feedback = { refused: err.message };
        }
      }
      return { grantedTools: granted.grantedTools, noteId, learning, feedback };
    },
  };
}
