/**
 * One way to say what is wrong with a value zod refused: `path: message` per issue, joined with
 * "; ". Workflows, activities, the CLI and the config loader all print it the same way.
 */
import type { z } from 'zod';

/**
 * `root` names the value itself when an issue has no path ("(input)", "note"); `prefix`, if
 * given, goes before every path ("settings.delayMs: …").
 */
export function formatIssues(error: z.ZodError, root = '(input)', options: { prefix?: string; separator?: string } = {}): string {
  return error.issues
    .map((i) => {
      const path = [options.prefix, ...i.path.map(String)].filter((p) => p !== undefined && p !== '').join('.');
      return `${path || root}: ${i.message}`;
    })
    .join(options.separator ?? '; ');
}
