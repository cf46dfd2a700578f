/** Argument parsers shared by the CLI's commands: a bad value is commander's usage error (exit 2) naming it. */
import { InvalidArgumentError } from 'commander';
import type { z } from 'zod';
import { agentIdSchema } from '../core/ids.js';

/** A value checked by a zod schema: `bad <label> "<raw>": <why>`. */
export function schemaArg<T>(label: string, schema: z.ZodType<T>) {
  return (raw: string): T => {
    const r = schema.safeParse(raw);
    if (!r.success) throw new InvalidArgumentError(`bad ${label} "${raw}": ${r.error.issues[0]?.message}`);
    return r.data;
  };
}

export const agentIdArg = schemaArg('agent id', agentIdSchema);

/** A number in [min, max] (an integer unless `int` is false). */
export function numberArg(name: string, min: number, max: number, int = true) {
  return (raw: string): number => {
    const n = Number(raw);
    if (!Number.isFinite(n) || n < min || n > max || (int && !Number.isInteger(n))) {
      throw new InvalidArgumentError(
        `${name} must be ${int ? 'an integer' : 'a number'} in ${min}..${max}, got "${raw}"`,
      );
    }
    return n;
  };
}

/** One of a fixed list of values. */
export function oneOfArg<const T extends string>(name: string, values: readonly T[]) {
  return (raw: string): T => {
    if (!(values as readonly string[]).includes(raw))
      throw new InvalidArgumentError(`${name} must be one of ${values.join(', ')}, got "${raw}"`);
    return raw as T;
  };
}
