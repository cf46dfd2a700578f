/**
 * Commands that change the loop itself: help, config (agent_config), cycle settings. Cycle
 * commands write nothing: they return LoopEffects the workflow applies to its own state.
 */
import { clipText } from '../../core/sanitize.js';
import { and, eq, inArray } from 'drizzle-orm';
import { abstractTriggerKey } from '../../core/abstracts.js';
import {
  configKeyNames,
  configKeys,
  helpText,
  validateConfigValue,
  type CommandType,
  type ConfigKey,
} from '../../core/catalogue.js';
import type { LoopEffect } from '../../core/loop-types.js';
import { makeAutoAbstract } from '../../db/queries/abstracts.js';
import { agentConfig, llmRecentResponses } from '../../db/schema/index.js';
import { CommandError, type FamilyTypes, type Handler, type HandlerMap } from './shared.js';

const show = (v: unknown) => clipText(JSON.stringify(v) ?? 'null', 300);

export const helpHandlers: HandlerMap<'help'> = {
  async help(_ctx, a) {
    const text = helpText(a.family);
    return { message: a.family ? `help for ${a.family}` : 'command catalogue', text };
  },
};

/** Effects a config key has on the loop's in-memory settings, besides `configChanged`. */
function keyEffects(key: ConfigKey, value: unknown): LoopEffect[] {
  switch (key) {
    case 'recent_responses':
      return [{ kind: 'setResponses', n: value as number }];
    case 'context_mode':
      return [{ kind: 'setContextMode', mode: value as 'standard' | 'concentration' | 'meditation' }];
    case 'notes_mode':
      return [{ kind: 'setNotesMode', mode: value as 'auto' | 'manual' }];
    default:
      return [];
  }
}

/**
 * A command that switches the context mode (standard / concentration / meditation) first
 * digests the work done in the old mode: an abstract, made in the command's transaction, when
 * the mode differs from the one this tick was thought in (recorded with the tick's reply).
 * Main loop only: a task loop's cycle effects do not change the main loop's mode.
 */
function withModeChangeAbstract<T extends CommandType>(inner: Handler<T>): Handler<T> {
  return async (ctx, a) => {
    const r = await inner(ctx, a);
    const next = r.effects?.find(
      (e): e is Extract<LoopEffect, { kind: 'setContextMode' }> => e.kind === 'setContextMode',
    );
    if (!next || ctx.mode !== 'main') return r;
    const [thought] = await ctx.tx
      .select({ contextMode: llmRecentResponses.contextMode })
      .from(llmRecentResponses)
      .where(and(eq(llmRecentResponses.agentId, ctx.agentId), eq(llmRecentResponses.tick, ctx.tick)));
    if (!thought || thought.contextMode === next.mode) return r;
    const made = await makeAutoAbstract(ctx.tx, {
      agentId: ctx.agentId,
      trigger: 'mode_change',
      triggerKey: abstractTriggerKey('mode_change', ctx.tick),
    });
    return made.created && made.abstractId !== null
      ? { ...r, message: clipText(`${r.message}; abstract #${made.abstractId}`, 200) }
      : r;
  };
}

export const configHandlers: HandlerMap<FamilyTypes<'config'>> = {
  async 'config.get'({ tx, agentId }, a) {
    const [row] = await tx
      .select()
      .from(agentConfig)
      .where(and(eq(agentConfig.agentId, agentId), eq(agentConfig.key, a.key)));
    const value = row ? row.value : configKeys[a.key].default;
    const line = `${a.key} = ${show(value)}${row ? '' : ' (default)'} — ${configKeys[a.key].help}`;
    return { message: clipText(line, 200), text: line };
  },
  async 'config.list'({ tx, agentId }) {
    const rows = await tx
      .select()
      .from(agentConfig)
      .where(and(eq(agentConfig.agentId, agentId), inArray(agentConfig.key, configKeyNames)));
    const stored = new Map(rows.map((r) => [r.key, r.value]));
    const lines = configKeyNames.map(
      (k) =>
        `${k} = ${show(stored.has(k) ? stored.get(k) : configKeys[k].default)}${stored.has(k) ? '' : ' (default)'} — ${configKeys[k].help}`,
    );
    return { message: `${lines.length} settings`, text: lines.join('\n') };
  },
  'config.set': withModeChangeAbstract<'config.set'>(async ({ tx, agentId }, a) => {
    // The catalogue already checked the value; parse again for the schema's output (trimmed strings).
    const checked = validateConfigValue(a.key, a.value);
    if (!checked.ok) throw new CommandError(checked.reason);
    const value = checked.value;
    await tx
      .insert(agentConfig)
      .values({ agentId, key: a.key, value: value as object, description: configKeys[a.key].help })
      .onConflictDoUpdate({ target: [agentConfig.agentId, agentConfig.key], set: { value: value as object } });
    return {
      message: clipText(`${a.key} set to ${show(value)}`, 200),
      effects: [{ kind: 'configChanged', keys: [a.key], values: { [a.key]: value } }, ...keyEffects(a.key, value)],
    };
  }),
};

export const cycleHandlers: HandlerMap<FamilyTypes<'cycle'>> = {
  async 'cycle.responses'(_ctx, a) {
    return { message: `context shows the last ${a.n} replies`, effects: [{ kind: 'setResponses', n: a.n }] };
  },
  'cycle.concentration': withModeChangeAbstract<'cycle.concentration'>(async (_ctx, a) => {
    if (!a.on)
      return {
        message: 'concentration off (standard context)',
        effects: [{ kind: 'setContextMode', mode: 'standard' }],
      };
    const filter = {
      ...(a.tags?.length ? { tags: a.tags } : {}),
      ...(a.emotions?.length ? { emotions: a.emotions } : {}),
      op: a.op ?? 'or',
    };
    const on = [...(a.tags ?? []), ...(a.emotions ?? [])].join(` ${filter.op} `);
    return {
      message: clipText(`concentration on${on ? `: ${on}` : ''}`, 200),
      effects: [{ kind: 'setContextMode', mode: 'concentration', filter }],
    };
  }),
  'cycle.meditation': withModeChangeAbstract<'cycle.meditation'>(async (_ctx, a) =>
    a.on
      ? { message: 'meditation on (diverse context)', effects: [{ kind: 'setContextMode', mode: 'meditation' }] }
      : { message: 'meditation off (standard context)', effects: [{ kind: 'setContextMode', mode: 'standard' }] },
  ),
  async 'cycle.mode'(_ctx, a) {
    const f = a.filter;
    const filter = f
      ? {
          ...(f.min_priority !== undefined ? { minPriority: f.min_priority } : {}),
          ...(f.tags?.length ? { tags: f.tags } : {}),
          ...(f.sources?.length ? { sources: f.sources } : {}),
        }
      : undefined;
    return {
      message: `notes mode ${a.mode}`,
      effects: [{ kind: 'setNotesMode', mode: a.mode, ...(filter ? { filter } : {}) }],
    };
  },
  async 'cycle.pause'(_ctx, a) {
    return { message: `pausing for ${a.ticks} ticks`, effects: [{ kind: 'pause', ticks: a.ticks }] };
  },
  async 'cycle.idle'(_ctx, a) {
    const effect: LoopEffect = {
      kind: 'idle',
      on: a.on,
      ...(a.wake_on ? { wakeOn: [...new Set(a.wake_on)] } : {}),
      ...(a.timeout_ms !== undefined ? { timeoutMs: a.timeout_ms } : {}),
    };
    return {
      message: a.on ? `idle until ${(a.wake_on ?? ['note', 'process', 'timeout']).join(' | ')}` : 'idle off',
      effects: [effect],
    };
  },
};
