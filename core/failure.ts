/**
 * Which side of the line an error falls on: `infra` (a dependency — Postgres, Docker, an LLM
 * endpoint, the network — is away or overloaded: retry, without a limit, until it returns) or
 * `request` (the request itself is wrong — bad data, a constraint, a missing table, model
 * text the database refuses: retrying repeats the same failure, so report it once). Anything
 * else is `unknown` (a bug): retried a few times, then reported like a request error.
 */
import { clipText } from './sanitize.js';

type FailureClass = 'infra' | 'request' | 'unknown';

/** Node socket/DNS error codes that mean "the other side is not there right now". */
const infraErrnos = new Set([
  'ECONNREFUSED',
  'ECONNRESET',
  'ECONNABORTED',
  'ETIMEDOUT',
  'EPIPE',
  'ENOTFOUND',
  'EAI_AGAIN',
  'EHOSTUNREACH',
  'EHOSTDOWN',
  'ENETUNREACH',
  'ENETDOWN',
  'EADDRNOTAVAIL',
]);

/**
 * SQLSTATE classes (the first two characters) that are the server's state, not the request's:
 * 08 connection exception, 40 transaction rollback (serialization, deadlock), 53 insufficient
 * resources, 57 operator intervention (shutdown, cannot connect now), 58 system error, XX internal.
 */
const infraSqlClasses = new Set(['08', '40', '53', '57', '58', 'XX']);

/** Messages that pg and node-postgres give a lost connection, which carry no code. */
const infraMessages = [
  /connection terminated/i,
  /timeout exceeded when trying to connect/i,
  /connection (?:is )?(?:closed|ended)/i,
  /client has encountered a connection error/i,
  /the database system is (?:starting up|shutting down|in recovery mode)/i,
  /socket hang up/i,
  /server closed the connection unexpectedly/i,
  /Cannot use a pool after calling end/i,
];

/** The plain facts of one error in a cause chain (so this module needs no driver types). */
interface ErrorFacts {
  name?: string;
  code?: unknown;
  message?: string;
}

/** Classify one link of an error chain. */
function classifyOne(e: ErrorFacts): FailureClass {
  const code = typeof e.code === 'string' ? e.code : undefined;
  if (code && infraErrnos.has(code)) return 'infra';
  if (code && /^[0-9A-Z]{5}$/.test(code)) return infraSqlClasses.has(code.slice(0, 2)) ? 'infra' : 'request';
  if (e.name === 'ZodError') return 'request';
  if (e.message && infraMessages.some((re) => re.test(e.message!))) return 'infra';
  return 'unknown';
}

/**
 * Classify an error by its whole chain (`cause`, and `errors` of an AggregateError, as a failed
 * connect to both ::1 and 127.0.0.1 gives): the first link that is not `unknown` decides,
 * outermost first (Drizzle wraps the driver's error as its `cause`).
 */
export function classifyError(err: unknown): FailureClass {
  const seen = new Set<unknown>();
  const queue: unknown[] = [err];
  while (queue.length > 0) {
    const e = queue.shift();
    if (!e || typeof e !== 'object' || seen.has(e)) continue;
    seen.add(e);
    const c = classifyOne(e as ErrorFacts);
    if (c !== 'unknown') return c;
    const { cause, errors } = e as { cause?: unknown; errors?: unknown };
    if (cause) queue.push(cause);
    if (Array.isArray(errors)) queue.push(...errors);
  }
  return 'unknown';
}

/** A Postgres SQLSTATE anywhere in an error's cause chain (Drizzle wraps the driver's error). */
export function sqlStateOf(err: unknown): string | undefined {
  for (let e: unknown = err; e && typeof e === 'object'; e = (e as { cause?: unknown }).cause) {
    const code = (e as { code?: unknown }).code;
    if (typeof code === 'string' && /^[0-9A-Z]{5}$/.test(code)) return code;
  }
  return undefined;
}

/** The innermost useful message of a chain, short enough for a status line or a log row. */
export function rootMessage(err: unknown, max = 300): string {
  let e: unknown = err;
  let msg = err instanceof Error ? err.message : String(err);
  for (let i = 0; i < 8 && e && typeof e === 'object'; i++) {
    const { cause, errors, message, code } = e as {
      cause?: unknown;
      errors?: unknown[];
      message?: string;
      code?: unknown;
    };
    if (message) msg = typeof code === 'string' ? `${message} (${code})` : message;
    e = cause ?? (Array.isArray(errors) ? errors[0] : undefined);
  }
  return clipText(msg, max);
}

/**
 * How long a workflow waits before it tries again what an outage stopped (a dependency away, no
 * LLM answering, a failing speech engine), `attempt` counting from 1: 2 s × 2^(attempt − 1), at
 * most 60 s, so 2, 4, 8, 16, 32 s, then 60 s for as long as the outage lasts. Every workflow that
 * waits out an outage uses this one formula.
 *
 * Why: 2 s rides out a blip (a dropped connection, a restarting container) without hammering a
 * dependency on its way back; doubling keeps a long outage small in history (each wait is one
 * timer and one more try: about 65 for an hour, not thousands); the 60 s cap bounds how late the
 * work resumes once the dependency answers again. Replay: a recorded timer is matched by its
 * sequence number, not its duration, so old histories replay under a changed formula
 * (test/replay proves it).
 */
export function outageBackoffMs(attempt: number): number {
  return Math.min(60_000, 2_000 * 2 ** Math.min(Math.max(attempt - 1, 0), 5));
}
