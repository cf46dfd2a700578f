/**
 * An agent document back to a file (`mindloop agents export`), and the pieces of it the agent
 * loop puts in force itself (pace, idle and the config keys that drive the loop). Writing leaves
 * out what equals the default, so the file reads short; parsing fills the defaults back in, so
 * export → apply is a no-op.
 */
import { stringify } from 'yaml';
import type { BudgetSettingsInput } from '../lifeforce-settings.js';
import { canonicalJson } from './compare.js';
import type { AgentDocument, wakeConditions } from './schema.js';

const drop = <T extends Record<string, unknown>>(o: T, defaults: Partial<T>): Partial<T> =>
  Object.fromEntries(
    Object.entries(o).filter(
      ([k, v]) => v !== undefined && !(k in defaults && canonicalJson(defaults[k as keyof T]) === canonicalJson(v)),
    ),
  ) as Partial<T>;

/** The document with defaults left out and one-model roles as a plain name: what a person would write. */
export function compactDocument(doc: AgentDocument): Record<string, unknown> {
  const models = doc.models && {
    ...Object.fromEntries(
      Object.entries(doc.models)
        .filter(([k, v]) => k !== 'validators' && v !== undefined)
        .map(([k, v]) => [k, Array.isArray(v) && v.length === 1 ? v[0] : v]),
    ),
    ...(doc.models.validators ? { validators: doc.models.validators.map((v) => drop(v, { trust: 1 })) } : {}),
  };
  const out: Record<string, unknown> = {
    id: doc.id,
    name: doc.name,
    description: doc.description,
    identity: doc.identity && drop(doc.identity, {}),
    systemPrompt: doc.systemPrompt && drop(doc.systemPrompt, {}),
    thinkingMethod: doc.thinkingMethod === null ? null : doc.thinkingMethod && drop(doc.thinkingMethod, {}),
    goals: doc.goals?.map((g) => drop(g, { priority: 0, status: 'active' })),
    tasks: doc.tasks?.map((t) => drop(t, { priority: 0, status: 'open' })),
    ethics: doc.ethics?.map((e) => drop(e, { severity: 'block', scope: 'agent', forbids: [], rules: [] })),
    models,
    tools: doc.tools && {
      ...doc.tools,
      ...(doc.tools.mcp ? { mcp: doc.tools.mcp.map((e) => drop(e, { enabled: true })) } : {}),
    },
    lifeforce: doc.lifeforce,
    pace: doc.pace,
    idle: doc.idle,
    config: doc.config,
    peers: doc.peers?.map((p) => {
      const rest = drop(p, { relation: 'peer', status: 'active' });
      return Object.keys(rest).length === 1 ? p.id : rest;
    }),
  };
  return Object.fromEntries(Object.entries(out).filter(([, v]) => v !== undefined));
}

/** The file's text: YAML (default) or JSON, with an optional leading comment (YAML only). */
export function renderAgentFile(doc: AgentDocument, format: 'yaml' | 'json' = 'yaml', comment?: string): string {
  const compact = compactDocument(doc);
  if (format === 'json') return `${JSON.stringify(compact, null, 2)}\n`;
  const head = comment
    ? `${comment
        .split('\n')
        .map((l) => `# ${l}`)
        .join('\n')}\n`
    : '';
  return head + stringify(compact, { lineWidth: 100, aliasDuplicateObjects: false });
}

/** Loop settings a document puts in force: the shape of the loop's `setConfig` update. */
export interface LoopSettingsPatch {
  delayMs?: number;
  maxTokens?: number;
  recentK?: number;
  contextMode?: 'standard' | 'concentration' | 'meditation';
  notesMode?: 'auto' | 'manual';
  idle?: { on?: boolean; wakeOn?: Array<(typeof wakeConditions)[number]>; timeoutMs?: number };
}

/** The loop settings `doc` states (pace, idle, and the config keys the loop reads); empty when none. */
export function loopSettingsOf(doc: AgentDocument): LoopSettingsPatch {
  const c = doc.config ?? {};
  const out: LoopSettingsPatch = {};
  if (doc.pace?.delayMs !== undefined) out.delayMs = doc.pace.delayMs;
  if (typeof c.max_tokens === 'number') out.maxTokens = c.max_tokens;
  if (typeof c.recent_responses === 'number') out.recentK = c.recent_responses;
  if (c.context_mode !== undefined) out.contextMode = c.context_mode as LoopSettingsPatch['contextMode'];
  if (c.notes_mode !== undefined) out.notesMode = c.notes_mode as LoopSettingsPatch['notesMode'];
  const idle = Object.fromEntries(Object.entries(doc.idle ?? {}).filter(([, v]) => v !== undefined));
  if (Object.keys(idle).length > 0) out.idle = idle;
  return out;
}

/** What `agentLoopWorkflow` is started with for a document: its id, name, loop settings and budget. */
export interface AgentLoopStartPieces {
  agentId: string;
  name?: string;
  settings: LoopSettingsPatch;
  lifeforce?: BudgetSettingsInput;
}

/** The start input pieces of `agentLoopWorkflow` for an agent file. */
export function agentLoopStartOf(doc: AgentDocument): AgentLoopStartPieces {
  return {
    agentId: doc.id,
    ...(doc.name !== undefined ? { name: doc.name } : {}),
    settings: loopSettingsOf(doc),
    ...(doc.lifeforce && Object.keys(doc.lifeforce).length > 0 ? { lifeforce: doc.lifeforce } : {}),
  };
}
