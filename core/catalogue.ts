/**
 * The command catalogue as data: for every command type its family, action, zod
 * args schema, one-line help, the validation rating it needs, whether it writes, and whether
 * an auxiliary (task) loop may use it. Pure: the workflow imports it (config keys, rating
 * thresholds) as well as the command activities. The definitions live in catalogue/ by what
 * they act on (memory-commands.ts, agency-commands.ts), with the argument schemas they share
 * (args.ts) and the config keys (config-keys.ts).
 */
import { formatIssues } from './zod-issues.js';
import type { z } from 'zod';
import type { ParsedCommand } from './loop-types.js';
import type { Def } from './catalogue/args.js';
import { configKeys, configKeyNames } from './catalogue/config-keys.js';
import { memoryCommands } from './catalogue/memory-commands.js';
import { agencyCommands } from './catalogue/agency-commands.js';

export { configKeys, configKeyNames, validateConfigValue, type ConfigKey } from './catalogue/config-keys.js';

const definitions = { ...memoryCommands, ...agencyCommands };

export type CommandType = keyof typeof definitions;
export type ArgsOf<T extends CommandType> = z.output<(typeof definitions)[T]['args']>;

interface CommandSpec {
  type: CommandType;
  family: string;
  action: string;
  args: z.ZodType;
  help: string;
  usage: string;
  minRating: number;
  writes: boolean;
  allowedInTaskLoop: boolean;
  destructive: boolean;
}

/** Types that always need a +2 rating besides `*.delete`. */
const dangerousTypes: ReadonlySet<string> = new Set(['config.set', 'shell', 'spawn']);

function usageOf(schema: z.ZodType): string {
  const shape = (schema as unknown as { shape?: Record<string, z.ZodType> }).shape;
  if (!shape) return '{}';
  const keys = Object.keys(shape).map((k) => (shape[k]!.safeParse(undefined).success ? `${k}?` : k));
  return `{${keys.join(', ')}}`;
}

/** The catalogue, one entry per command type. */
export const catalogue: Readonly<Record<CommandType, CommandSpec>> = Object.fromEntries(
  Object.entries(definitions).map(([type, d]: [string, Def<z.ZodType>]) => {
    const [family, action = ''] = type.split('.') as [string, string?];
    const minRating = d.minRating ?? (action === 'delete' || dangerousTypes.has(type) ? 2 : 1);
    const spec: CommandSpec = {
      type: type as CommandType,
      family,
      action,
      args: d.args,
      help: d.help,
      usage: d.usage ?? usageOf(d.args),
      minRating,
      writes: d.writes,
      allowedInTaskLoop: d.allowedInTaskLoop ?? !d.writes,
      destructive: d.destructive ?? false,
    };
    return [type, spec];
  }),
) as Record<CommandType, CommandSpec>;

export const commandTypes = Object.keys(catalogue) as CommandType[];
export const families: readonly string[] = [...new Set(commandTypes.map((t) => catalogue[t].family))];

function isCommandType(type: string): type is CommandType {
  return Object.hasOwn(catalogue, type);
}

/** A command whose args passed its schema (args are the parsed values; look the spec up in `catalogue`). */
export type ValidatedCommand = {
  [T in CommandType]: { cmdId: string; type: T; args: ArgsOf<T>; description?: string };
}[CommandType];

type Validation = { ok: true; command: ValidatedCommand } | { ok: false; code: 'unknown' | 'invalid'; reason: string };

/** Check a parsed command against the catalogue; the reason names the bad arg fields. */
export function validateCommand(cmd: ParsedCommand): Validation {
  if (!isCommandType(cmd.type)) {
    const family = cmd.type.split('.')[0] ?? '';
    const hint = families.includes(family)
      ? `; ${family} has: ${commandTypes
          .filter((t) => catalogue[t].family === family)
          .map((t) => catalogue[t].action)
          .join(', ')}`
      : '; see help';
    return { ok: false, code: 'unknown', reason: `unknown command type '${cmd.type}'${hint}` };
  }
  const spec = catalogue[cmd.type];
  const r = spec.args.safeParse(cmd.args ?? {});
  if (!r.success)
    return {
      ok: false,
      code: 'invalid',
      reason: `invalid args for ${cmd.type}: ${formatIssues(r.error, 'args', { under: 'args' })}`,
    };
  const command = {
    cmdId: cmd.cmdId,
    type: cmd.type,
    args: r.data,
    ...(cmd.description !== undefined ? { description: cmd.description } : {}),
  };
  return { ok: true, command: command as ValidatedCommand };
}

/** Is this command type destructive? An unknown type is not: the catalogue rejects it, it never runs. */
export function isDestructive(type: string): boolean {
  return isCommandType(type) && catalogue[type].destructive;
}

/** The rating a command type needs; unknown types need the dangerous level. */
export function minRatingFor(type: string): number {
  return isCommandType(type) ? catalogue[type].minRating : 2;
}

/** The cmd_ids a tick's rating lets through; `null` rating means auto_pass (all pass). */
export function allowedByRating(commands: readonly ParsedCommand[], rating: number | null): string[] {
  return commands.filter((c) => rating === null || rating >= minRatingFor(c.type)).map((c) => c.cmdId);
}

/** Help text: every command on one line, or one family in detail. */
export function helpText(family?: string): string {
  if (family !== undefined && family !== '' && family !== 'all') {
    const types = commandTypes.filter((t) => catalogue[t].family === family);
    if (types.length === 0) return `No family '${family}'. Families: ${families.join(', ')}.`;
    const lines = types.map((t) => {
      const s = catalogue[t];
      const flags = [
        s.writes ? 'writes' : 'reads',
        `needs rating ≥ +${s.minRating}`,
        s.destructive ? 'destructive: held for a human when no validator is configured' : null,
        s.allowedInTaskLoop ? 'allowed in task loops' : null,
      ].filter(Boolean);
      return `${t} ${s.usage} — ${s.help} (${flags.join('; ')})`;
    });
    if (family === 'config') {
      lines.push(
        'Keys:',
        ...configKeyNames.map(
          (k) => `  ${k} (default ${JSON.stringify(configKeys[k].default)}): ${configKeys[k].help}`,
        ),
      );
    }
    return lines.join('\n');
  }
  const lines = commandTypes.map((t) => `${t} ${catalogue[t].usage} — ${catalogue[t].help}`);
  return [
    'Commands (type args — what it does; ? = optional; ids are numbers). `help {family}` gives details.',
    ...lines,
  ].join('\n');
}
