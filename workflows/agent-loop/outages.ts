/**
 * What the loop waits out without failing: no LLM answering (Core Outage) and a budget that
 * cannot cover the next think (exhausted lifeforce). Notes keep arriving meanwhile; only stop
 * ends a wait early. (A database or Docker outage is ridden out step by step: Loop.rideOut.)
 */
import { condition, upsertSearchAttributes } from '@temporalio/workflow';
import { outageBackoffMs } from '../../core/failure.js';
import { failureMessage } from '../lib/infra.js';
import type { LifeforceShortfall } from '../lib/lifeforce.js';
import { lifeforceSearchAttribute } from '../lib/search-attributes.js';
import { timerText } from '../lib/ui-text.js';
import { startEscalation } from './children.js';
import { sanitizeAndClip, type Loop } from './loop.js';
import { models, records } from './proxies.js';

/** An exhausted wait re-checks at least this often (a grant wakes it sooner). */
const exhaustedRecheckMs = 3_600_000;

/** No LLM answered: log it once, keep taking notes, and probe with backoff until one answers. */
export async function coreOutage(loop: Loop, err: unknown): Promise<void> {
  const { agentId, state } = loop;
  const message = failureMessage(err);
  state.counters.llmFailures++;
  // Phase and mode change together, so the status query never shows one without the other.
  const entering = state.operatingMode !== 'core_outage';
  if (entering) {
    state.operatingMode = 'core_outage';
    state.counters.outages++;
    loop.outage = { since: new Date().toISOString(), attempts: 0, lastError: message };
  }
  loop.phase = 'outage';
  if (entering)
    await loop.rideOut('logProcess', () =>
      records.logProcess({
        agentId,
        processId: 'core-outage',
        kind: 'core_outage',
        status: 'offline',
        message: sanitizeAndClip(message),
        tick: state.tick,
        mode: 'core_outage',
      }),
    );
  let current = loop.outage ?? { since: new Date().toISOString(), attempts: 0, lastError: message };
  current = { ...current, lastError: message };
  loop.outage = current;
  while (!loop.stopRequested) {
    current = { ...current, attempts: current.attempts + 1 };
    loop.outage = current;
    const backoffMs = outageBackoffMs(current.attempts);
    await condition(() => loop.stopRequested, backoffMs, {
      summary: timerText.coreOutage(backoffMs, current.attempts),
    });
    if (loop.stopRequested) return;
    const probe = await loop.rideOut('probeLlm', () => models.probeLlm({ agentId, role: 'agent' }));
    if (probe.ok) return; // the next think decides whether the outage is over
    current = { ...current, lastError: probe.error ?? current.lastError };
    loop.outage = current;
  }
}

/** The first successful think after an outage closes it. */
export async function endOutage(loop: Loop, model: string): Promise<void> {
  const { state } = loop;
  if (state.operatingMode !== 'core_outage') return;
  // Core Outage takes precedence over Isolated: an agent isolated before it is isolated after.
  const mode = state.isolation.since !== null ? 'isolated' : 'normal';
  state.operatingMode = mode;
  const message = `recovered: ${model} answers after ${loop.outage?.attempts ?? 0} probe(s)`;
  await loop.rideOut('logProcess', () =>
    records.logProcess({
      agentId: loop.agentId,
      processId: 'core-outage',
      kind: 'core_outage',
      status: 'close',
      message,
      tick: state.tick,
      mode,
    }),
  );
  loop.outage = null;
}

/**
 * The budget cannot cover the tick's call: nothing ran, nothing was spent. Pause visibly (phase
 * `exhausted`, search attribute MindloopLifeforce=exhausted) until regeneration covers the need
 * or a grant arrives (a `wake`); with `onExhausted: escalate`, first ask a human for a grant
 * through an escalation.
 */
export async function exhausted(loop: Loop, shortfall: LifeforceShortfall, tick: number): Promise<void> {
  const { agentId, state } = loop;
  const since = new Date().toISOString();
  const before = loop.lifeforce;
  loop.exhaustions++;
  upsertSearchAttributes([{ key: lifeforceSearchAttribute, value: 'exhausted' }]);
  let escalationId: string | undefined;
  const warning = `tick ${tick}: ${shortfall.budgetId} cannot cover ${shortfall.needed} LF (${shortfall.reason}; available ${shortfall.available ?? 'unlimited'} LF)`;
  await loop.rideOut('logProcess', () =>
    records.logProcess({
      agentId,
      processId: 'lifeforce',
      kind: 'lifeforce',
      status: 'warning',
      message: sanitizeAndClip(warning),
      tick: state.tick,
    }),
  );
  while (!loop.stopRequested) {
    const v = await loop.rideOut('lifeforceState', () =>
      records.lifeforceState({
        agentId,
        budgetId: shortfall.budgetId,
        at: new Date().toISOString(),
        need: shortfall.needed,
      }),
    );
    const waitMs = v.waitMs ?? null;
    loop.lifeforce = {
      budgetId: v.budgetId,
      available: v.available,
      capacity: v.capacity,
      lastCharge: before?.lastCharge ?? null,
      priorityKey: v.priorityKey,
      explicitPriority: v.explicitPriority,
      onExhausted: v.onExhausted,
      exhausted: {
        since,
        needed: shortfall.needed,
        reason: shortfall.reason,
        waitMs,
        ...(v.needs ? { needs: v.needs } : {}),
        ...(escalationId ? { escalationId } : {}),
      },
    };
    loop.phase = 'exhausted';
    if (waitMs === 0 && !v.exhausted) break;
    if (
      v.onExhausted === 'escalate' &&
      escalationId === undefined &&
      Date.now() - loop.lastLifeforceEscalation >= 86_400_000
    ) {
      loop.lastLifeforceEscalation = Date.now();
      escalationId = `lifeforce-${agentId}-${loop.exhaustions}-${tick}`.slice(0, 64);
      const amount = Math.max(v.askFor, shortfall.needed);
      const when =
        waitMs !== null
          ? `, regeneration covers it in ${Math.ceil(waitMs / 60_000)} min`
          : ', no regeneration covers it';
      const task = `Lifeforce exhausted: budget ${shortfall.budgetId} cannot cover ${shortfall.needed} LF for tick ${tick} (available ${v.available ?? 'unlimited'} LF${when}). Approve to grant ${amount} LF.`;
      const proposal = { kind: 'lifeforce', name: 'grant', args: { budgetId: shortfall.budgetId, amount } };
      await startEscalation(loop, {
        kind: 'escalate',
        escalationId,
        input: { escalationId, agentId, task, humanRequired: true, proposal, tick },
      });
      loop.lifeforce = { ...loop.lifeforce, exhausted: { ...loop.lifeforce.exhausted!, escalationId } };
    }
    state.pendingWake = false;
    // Regeneration covers it after waitMs; with none coming, re-read the budget now and then.
    const ms = Math.max(1000, waitMs ?? exhaustedRecheckMs);
    await condition(() => loop.stopRequested || state.pendingWake, ms, {
      summary: timerText.exhausted(waitMs, shortfall.budgetId),
    });
    if (state.pendingWake || waitMs !== null) break; // a grant, a note or regeneration: try the tick again
  }
  upsertSearchAttributes([{ key: lifeforceSearchAttribute, value: 'ok' }]);
  if (loop.lifeforce) loop.lifeforce = { ...loop.lifeforce, exhausted: null };
  const retry = `tick ${tick}: trying again after ${escalationId ? `escalation ${escalationId}, ` : ''}a wait`;
  await loop.rideOut('logProcess', () =>
    records.logProcess({
      agentId,
      processId: 'lifeforce',
      kind: 'lifeforce',
      status: 'close',
      message: sanitizeAndClip(retry),
      tick: state.tick,
    }),
  );
}
