/**
 * One way to say what is wrong with a value zod refused: `path: message` per issue (at most
 * `max`, default 6), joined with "; ". Workflows, activities, the CLI and the config loader
 * all print it the same way: `args.title: required (string); args: unknown field 'x'`.
 */
import type { z } from 'zod';

interface IssueFormat {
  /** Put before every path (`args` → `args.title`); without it an empty path is `root`. */
  under?: string;
  /** At most this many issues (default 6). */
  max?: number;
  separator?: string;
}

/** `root` names the value itself when an issue has no path ("(input)", "note"). */
export function formatIssues(
  error: z.ZodError | readonly z.core.$ZodIssue[],
  root = '(input)',
  options: IssueFormat = {},
): string {
  const issues = 'issues' in error ? error.issues : error;
  return issues
    .slice(0, options.max ?? 6)
    .map((i) => {
      const path = [options.under, ...i.path.map(String)].filter((p) => p !== undefined && p !== '').join('.') || root;
      if (i.code === 'unrecognized_keys')
        return `${path}: unknown field${i.keys.length > 1 ? 's' : ''} ${i.keys.map((k) => `'${k}'`).join(', ')}`;
      const missing = /^Invalid input: expected (\w+), received undefined$/.exec(i.message);
      if (missing) return `${path}: required (${missing[1]})`;
      return `${path}: ${i.message}`;
    })
    .join(options.separator ?? '; ');
}
