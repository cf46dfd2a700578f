/**
 * Subjects as an MCP client gives them, made safe: every subject is resolved under the bus root
 * (given relative, `dev.request.echo`, or absolute, `<root>.dev.request.echo`), must start with
 * one of the bus's namespaces (or `staging.<namespace>`), and consists of plain tokens only; a
 * wildcard is taken where listening is meant (subscribe), never where sending is (publish,
 * request). Publishing is further limited by an allow-list of NATS patterns under the root. Pure.
 */
import { busNamespaces } from '../../core/bus/subjects.js';

/** Where an MCP client may publish unless the bridge is started with more (`--allow`): never commands, never meta. */
export const defaultPublishAllow = ['dev.>', 'low.>', 'high.>', 'staging.>'] as const;

/** A subject or pattern the bridge will not use, and why. */
export class SubjectRefusedError extends Error {
  override readonly name = 'SubjectRefusedError';
}

const maxSubjectLength = 512;
/** The characters of a literal token on this bus: what escapeToken produces, plus the names the code uses. */
const literalToken = /^[A-Za-z0-9_~-]{1,256}$/;

const namespaceList = `${busNamespaces.join(', ')} or staging.<namespace>`;

/**
 * The absolute subject for `raw` under `root`; a SubjectRefusedError names what is wrong.
 * `wildcards`: whether `*` (one token) and a final `>` (the rest) may appear.
 */
export function resolveSubject(root: string, raw: string, o: { wildcards: boolean }): string {
  if (typeof raw !== 'string' || raw.length === 0) throw new SubjectRefusedError('the subject is empty');
  if (raw.length > maxSubjectLength)
    throw new SubjectRefusedError(`the subject is longer than ${maxSubjectLength} characters`);
  if (/\s/.test(raw)) throw new SubjectRefusedError(`subject ${JSON.stringify(raw)} contains whitespace`);
  const absolute = raw.startsWith(`${root}.`);
  const rest = absolute ? raw.slice(root.length + 1) : raw;
  const tokens = rest.split('.');
  tokens.forEach((t, i) => {
    if (t === '')
      throw new SubjectRefusedError(`subject ${JSON.stringify(raw)} has an empty token (".." or a dot at an end)`);
    if (t === '*' || t === '>') {
      if (!o.wildcards)
        throw new SubjectRefusedError(
          `subject ${JSON.stringify(raw)} has a wildcard (${t}): a message goes to one concrete subject`,
        );
      if (t === '>' && i !== tokens.length - 1)
        throw new SubjectRefusedError(`subject ${JSON.stringify(raw)}: ">" may only be the last token`);
      return;
    }
    if (!literalToken.test(t))
      throw new SubjectRefusedError(
        `subject ${JSON.stringify(raw)}: token ${JSON.stringify(t)} may hold only letters, digits, "_", "-" and "~" (values are escaped, see docs/bus.md)`,
      );
  });
  const [first, second] = tokens;
  const isNamespace = (t: string | undefined) =>
    t === '*' || t === '>' || (busNamespaces as readonly string[]).includes(t ?? '');
  const placed = first === 'staging' ? tokens.length === 1 || isNamespace(second) : isNamespace(first);
  if (!placed) {
    throw new SubjectRefusedError(
      `subject ${JSON.stringify(raw)} is outside the bus root "${root}": give it relative to the root (e.g. dev.request.echo) or absolute (${root}.dev.request.echo), starting with a namespace: ${namespaceList}`,
    );
  }
  if (first === 'staging' && tokens.length === 1)
    throw new SubjectRefusedError(
      `subject ${JSON.stringify(raw)} names no namespace after staging (${busNamespaces.join(', ')})`,
    );
  return `${root}.${rest}`;
}

/** Whether `subject` (concrete) matches the NATS `pattern` (`*` one token, a final `>` one or more). */
export function subjectMatches(pattern: string, subject: string): boolean {
  const p = pattern.split('.');
  const s = subject.split('.');
  for (let i = 0; i < p.length; i++) {
    if (p[i] === '>') return s.length > i;
    if (i >= s.length) return false;
    if (p[i] !== '*' && p[i] !== s[i]) return false;
  }
  return p.length === s.length;
}

/** The subjects an MCP client may publish to: the defaults and the grants, as patterns under one root. */
export class PublishAllowList {
  /** The patterns as given (relative to the root where they were given so). */
  readonly patterns: readonly string[];
  private readonly absolute: readonly string[];

  constructor(
    readonly root: string,
    grants: readonly string[] = [],
  ) {
    this.patterns = [...new Set([...defaultPublishAllow, ...grants])];
    // A grant that does not resolve under the root is a configuration error: say so at start.
    this.absolute = this.patterns.map((p) => {
      try {
        return resolveSubject(root, p, { wildcards: true });
      } catch (err) {
        throw new SubjectRefusedError(`allow pattern ${JSON.stringify(p)}: ${(err as Error).message}`);
      }
    });
  }

  allows(subject: string): boolean {
    return this.absolute.some((p) => subjectMatches(p, subject));
  }

  /** Refuse `subject` unless allowed, naming the allow-list and how to widen it. */
  check(subject: string): void {
    if (this.allows(subject)) return;
    throw new SubjectRefusedError(
      `publishing to ${subject} is not allowed: an MCP client may publish only to subjects matching the allow-list (${this.patterns.join(', ')}) under the root "${this.root}"; ` +
        'the bridge grants more with --allow <pattern>. Notes to an agent go through the send_note tool.',
    );
  }
}
