/**
 * The SQL a test's code sends: every statement text any `pg` client sends while `recording` is
 * on (named statements by their text too). `install` in beforeAll, `restore` in afterAll.
 */
import pg from 'pg';

export function sqlLog() {
  const originalQuery = pg.Client.prototype.query;
  const log = {
    statements: [] as string[],
    recording: false,
    install(): void {
      pg.Client.prototype.query = function (this: pg.Client, ...args: unknown[]) {
        const first = args[0];
        if (log.recording)
          log.statements.push(typeof first === 'string' ? first : String((first as { text?: string })?.text ?? ''));
        return (originalQuery as (...a: unknown[]) => unknown).apply(this, args);
      } as typeof originalQuery;
    },
    restore(): void {
      pg.Client.prototype.query = originalQuery;
    },
  };
  return log;
}
