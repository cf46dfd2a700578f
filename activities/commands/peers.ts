/**
 * The agent among other agents: its known peers (`agents`), messages to them (`messages.send`:
 * a note with `source = 'peer'` on the receiver, whose loop is woken by a `wakeAgent` effect),
 * ratings of them (`reputation`: trust follows the history of ratings), and its own identity
 * (`identity`, shown in context 0). A refused command says which argument is wrong.
 */
import { eq } from 'drizzle-orm';
import { trustDefaults } from '../../core/society/trust.js';
import { agents } from '../../db/schema/index.js';
import {
  addPeer,
  deliverPeerMessage,
  markHeardFrom,
  peerLink,
  peerList,
  ratePeer,
  ratingHistory,
  removePeer,
  reputationAmongPeers,
  reputationRows,
} from '../../db/queries/peers.js';
import { oneLine } from '../../core/sanitize.js';
import { CommandError, listResult, type FamilyTypes, type HandlerMap, type Tx } from './shared.js';

const signed = (n: number) => `${n > 0 ? '+' : ''}${n}`;
const trustText = (t: number) => t.toFixed(2);

async function agentRow(tx: Tx, id: string) {
  const [row] = await tx.select().from(agents).where(eq(agents.id, id));
  return row;
}

/** `field` names another agent of this deployment (not the caller itself). */
async function requireOtherAgent(tx: Tx, self: string, id: string, field: string) {
  if (id === self) throw new CommandError(`${field}: '${id}' is you`);
  const row = await agentRow(tx, id);
  if (!row) throw new CommandError(`${field}: no agent '${id}'`);
  return row;
}

export const peerHandlers: HandlerMap<FamilyTypes<'agents'> | FamilyTypes<'messages'>> = {
  async 'agents.list'({ tx, agentId }, a) {
    const status = a.status === 'all' ? undefined : a.status;
    const rows = (await peerList(tx, agentId, status)).slice(0, a.limit ?? 50);
    return listResult(
      'known peers',
      rows.map(
        (p) =>
          `${p.peer}${p.name && p.name !== p.peer ? ` "${oneLine(p.name, 60)}"` : ''} (${p.relation}, ${p.status}) trust ${trustText(p.trust)}${p.lastSeenAt ? `, last heard from ${p.lastSeenAt.toISOString()}` : ''}${p.notes ? ` — ${oneLine(p.notes, 100)}` : ''}`,
      ),
    );
  },

  async 'agents.add'({ tx, agentId }, a) {
    await requireOtherAgent(tx, agentId, a.peer, 'peer');
    const before = await peerLink(tx, agentId, a.peer);
    if (before?.status === 'active' && (a.relation === undefined || a.relation === before.relation)) {
      return { message: `${a.peer} is already a known peer (${before.relation}, trust ${trustText(before.trust)})` };
    }
    await addPeer(tx, agentId, a.peer, a.relation, a.note);
    const after = await peerLink(tx, agentId, a.peer);
    return {
      message: `${a.peer} is ${before ? 'again' : 'now'} a known peer (${after!.relation}, trust ${trustText(after!.trust)})`,
    };
  },

  async 'agents.remove'({ tx, agentId }, a) {
    const link = await peerLink(tx, agentId, a.peer);
    if (!link && !a.block) throw new CommandError(`peer: '${a.peer}' is not one of your known peers`);
    await removePeer(tx, agentId, a.peer, a.block ?? false);
    return {
      message: a.block ? `${a.peer} is blocked: its messages are refused` : `${a.peer} is no longer a known peer`,
    };
  },

  async 'messages.send'(ctx, a) {
    const { tx, agentId, tick, logCmdId } = ctx;
    if (a.to === agentId) throw new CommandError(`to: '${a.to}' is you`);
    const link = await peerLink(tx, agentId, a.to);
    if (!link)
      throw new CommandError(`to: '${a.to}' is not one of your known peers (agents.add {peer: "${a.to}"} first)`);
    if (link.status === 'blocked')
      throw new CommandError(`to: you blocked '${a.to}' (agents.add it again to write to it)`);
    if (!(await agentRow(tx, a.to))) throw new CommandError(`to: no agent '${a.to}' in this deployment`);
    if ((await peerLink(tx, a.to, agentId))?.status === 'blocked')
      throw new CommandError(`to: '${a.to}' does not accept your messages`);
    const priority = a.priority ?? 1;
    const tags = a.tags ?? [];
    // The command's own key: a retried delivery finds the first one's notes instead of adding more.
    const { noteId } = await deliverPeerMessage(tx, {
      from: agentId,
      to: a.to,
      text: a.text,
      tags,
      priority,
      idempotencyKey: `cmd/${agentId}/${tick}/${logCmdId}`,
    });
    await markHeardFrom(tx, a.to, agentId);
    return {
      message: `message sent to ${a.to} (its note #${noteId})`,
      effects: [{ kind: 'wakeAgent', agentId: a.to }],
      committed: () => ctx.events?.event(agentId, 'message', { to: a.to, noteId, tick, text: a.text, priority, tags }),
    };
  },
};

export const reputationHandlers: HandlerMap<FamilyTypes<'reputation'>> = {
  async 'reputation.read'({ tx, agentId }, a) {
    const lines: string[] = [];
    if (a.peer !== undefined) {
      // One after another: the command's transaction is one connection.
      const rows = await reputationRows(tx, agentId, {
        subject: a.peer,
        ...(a.dimension ? { dimension: a.dimension } : {}),
      });
      const link = await peerLink(tx, agentId, a.peer);
      const history = await ratingHistory(tx, agentId, a.peer, {
        ...(a.dimension ? { dimension: a.dimension } : {}),
        limit: 10,
      });
      if (!link && rows.length === 0)
        throw new CommandError(`peer: you know nothing of '${a.peer}' (not a known peer, never rated)`);
      lines.push(
        `${a.peer}: ${link ? `${link.relation}, ${link.status}, trust ${trustText(link.trust)}` : 'not a known peer'}`,
      );
      for (const r of rows)
        lines.push(
          `- ${r.dimension}: score ${signed(r.score)} over ${r.evidenceCount} rating(s); last reason: ${oneLine(r.lastReason, 160)}`,
        );
      if (history.length)
        lines.push(
          'Your ratings, newest first:',
          ...history.map(
            (h) =>
              `- ${signed(h.score)} ${h.dimension}${h.tick !== null ? ` at tick ${h.tick}` : ''} (${h.source}): ${oneLine(h.reason, 160)}`,
          ),
        );
      return {
        message: `reputation of ${a.peer}: ${link ? `trust ${trustText(link.trust)}` : `${rows.length} dimension(s)`}`,
        text: lines.join('\n'),
      };
    }
    const rows = await reputationRows(tx, agentId, a.dimension ? { dimension: a.dimension } : {});
    const aboutMe = await reputationAmongPeers(tx, agentId);
    lines.push(
      ...(rows.length
        ? rows.map(
            (r) =>
              `${r.subject} ${r.dimension}: score ${signed(r.score)} over ${r.evidenceCount} rating(s); last reason: ${oneLine(r.lastReason, 120)}`,
          )
        : ['(you have rated no one)']),
    );
    lines.push(
      aboutMe.length
        ? `Others about you: ${aboutMe.map((d) => `${d.dimension} ${signed(d.mean)} from ${d.raters} peer(s)`).join('; ')}`
        : 'Others about you: no ratings yet',
    );
    return { message: `${rows.length} reputation entr${rows.length === 1 ? 'y' : 'ies'}`, text: lines.join('\n') };
  },

  async 'reputation.rate'({ tx, agentId, tick }, a) {
    if (a.peer === agentId) throw new CommandError(`peer: '${a.peer}' is you; rate your peers, not yourself`);
    const link = await peerLink(tx, agentId, a.peer);
    if (!link && !(await agentRow(tx, a.peer))) throw new CommandError(`peer: no agent '${a.peer}'`);
    const dimension = a.dimension ?? 'overall';
    const [before] = await reputationRows(tx, agentId, { subject: a.peer, dimension });
    const r = await ratePeer(tx, {
      agentId,
      peer: a.peer,
      score: a.score,
      reason: a.reason,
      dimension,
      source: 'agent',
      tick,
    });
    const from = before ? before.score : 0;
    const trustBefore = dimension === 'overall' ? (link?.trust ?? trustDefaults.neutral) : null;
    return {
      message: `rated ${a.peer} ${signed(a.score)} (${dimension}): ${trustBefore !== null ? `trust ${trustText(trustBefore)} → ${trustText(r.trust)}` : `score ${signed(from)} → ${signed(r.score)}`} over ${r.ratings} rating(s)`,
    };
  },
};

/** What `identity.set` changes besides the agents row's name and description. */
const identityKeys = ['persona', 'values', 'languages'] as const;

export const identityHandlers: HandlerMap<FamilyTypes<'identity'>> = {
  async 'identity.read'({ tx, agentId }) {
    const me = await agentRow(tx, agentId);
    if (!me) throw new CommandError(`agent ${agentId} does not exist`);
    const id = me.identity;
    const lines = [
      `name: ${me.name} (agent id ${me.id}, ${me.kind}, generation ${me.generation}${me.parentId ? `, parent ${me.parentId}` : ''})`,
      `description: ${me.description ?? '(none)'}`,
      `persona: ${id.persona ?? '(none)'}`,
      `values: ${id.values?.length ? id.values.join('; ') : '(none)'}`,
      `languages: ${id.languages?.length ? id.languages.join(', ') : '(none)'}`,
    ];
    return { message: `identity of ${me.name}`, text: lines.join('\n') };
  },

  async 'identity.set'({ tx, agentId }, a) {
    const me = await agentRow(tx, agentId);
    if (!me) throw new CommandError(`agent ${agentId} does not exist`);
    const identity = {
      ...me.identity,
      ...(a.persona !== undefined ? { persona: a.persona } : {}),
      ...(a.values !== undefined ? { values: a.values } : {}),
      ...(a.languages !== undefined ? { languages: a.languages } : {}),
    };
    await tx
      .update(agents)
      .set({
        ...(a.name !== undefined ? { name: a.name } : {}),
        // An empty description clears it.
        ...(a.description !== undefined ? { description: a.description === '' ? null : a.description } : {}),
        identity,
        updatedAt: new Date(),
      })
      .where(eq(agents.id, agentId));
    const changed = (['name', 'description', ...identityKeys] as const).filter((k) => a[k] !== undefined);
    return { message: `identity updated: ${changed.join(', ')}` };
  },
};
