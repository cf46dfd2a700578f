/**
 * The agent among its peers: waking those it wrote to, and Isolated mode when it reaches none.
 */
import { deprecatePatch, getExternalWorkflowHandle, log } from '@temporalio/workflow';
import type { LoopEffect } from '../../core/loop-types.js';
import { workflowIds } from '../../core/ids.js';
import { emergencyConsensusTag, nextIsolation, type PeerObservation } from '../../core/society/isolation.js';
import { failureMessage } from '../lib/infra.js';
import { sanitizeAndClip, type Loop } from './loop.js';
import { wakeSignal } from './messages.js';
import { records } from './proxies.js';

/**
 * Wake the agents a note was delivered to (peer messages). A peer whose loop is not running
 * reads the note when it next starts. peers-v1 (retired): older histories have no wakeAgent effects.
 */
export async function wakeAgents(loop: Loop, effects: readonly LoopEffect[]): Promise<void> {
  const targets = [
    ...new Set(effects.flatMap((e) => (e.kind === 'wakeAgent' && e.agentId !== loop.agentId ? [e.agentId] : []))),
  ];
  if (targets.length === 0) return;
  deprecatePatch('peers-v1');
  for (const id of targets) {
    try {
      await getExternalWorkflowHandle(workflowIds.agent(id)).signal(wakeSignal, { reason: 'note' });
    } catch (err) {
      log.info('peer not woken (its loop is not running)', { peer: id, error: failureMessage(err) });
    }
  }
}

/**
 * Isolated mode: an agent with known peers that reaches none of them for `isolation_ticks`
 * ticks in a row goes on alone (its applied commands are tagged `emergency_consensus`); a
 * reachable peer ends it. Entering and leaving are logged (process_log, kind `isolation`)
 * with the agent row's operating_mode. isolation-v1 (retired): histories from before it carry no
 * peer observations, and only a change of mode issues commands.
 */
export async function followPeers(loop: Loop, peers: PeerObservation | undefined, tick: number): Promise<void> {
  const { agentId, state } = loop;
  if (!peers) return;
  const step = nextIsolation(state.isolation, peers, new Date().toISOString(), tick);
  if (step.change === null) {
    state.isolation = step.state;
    return;
  }
  deprecatePatch('isolation-v1');
  const was = state.isolation;
  state.isolation = step.state;
  const entering = step.change === 'enter';
  const mode = entering ? 'isolated' : 'normal';
  if (state.operatingMode !== 'core_outage') state.operatingMode = mode;
  const message = entering
    ? `isolated: none of ${peers.known} known peer(s) reachable for ${step.state.unreachableTicks} tick(s); going on alone, applied commands tagged ${emergencyConsensusTag}`
    : peers.known === 0
      ? `no longer isolated: no known peers any more (isolated since tick ${was.sinceTick ?? '?'})`
      : `no longer isolated: ${peers.reachable} peer(s) reachable again (${peers.reachableIds.join(', ')}); isolated since tick ${was.sinceTick ?? '?'}`;
  await loop.rideOut('logProcess', () =>
    records.logProcess({
      agentId,
      processId: 'isolation',
      kind: 'isolation',
      status: entering ? 'warning' : 'close',
      message: sanitizeAndClip(message),
      tick,
      mode,
    }),
  );
}
