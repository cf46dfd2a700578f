/**
 * Reading an agent file: YAML (or JSON) text to a checked document, or every reason it is
 * refused, each with the field path. Limits come before any parsing work: the size, YAML aliases
 * (a few lines can expand to gigabytes), and then literal secrets, which are refused without
 * their value ever being printed.
 */
import { parseDocument } from 'yaml';
import { z } from 'zod';
import { utf8Bytes } from '../sanitize.js';
import { isPlainObject } from '../values.js';
import { agentDocumentSchema, fileConfigKeys, maxAgentFileBytes, type AgentDocument } from './schema.js';

/** YAML aliases a file may expand; more is an alias bomb, refused. */
const maxAliasCount = 100;

export type ParseResult = { ok: true; document: AgentDocument } | { ok: false; errors: string[] };

/** `goals[2].title`: array indexes in brackets, keys with dots. */
export function formatPath(path: readonly PropertyKey[]): string {
  let out = '';
  for (const p of path) out += typeof p === 'number' ? `[${p}]` : `${out === '' ? '' : '.'}${String(p)}`;
  return out || '(document)';
}

// ---- literal secrets ----------------------------------------------------------------------------

/** Keys whose value would be a secret: a file names the environment variable instead. */
const secretKey =
  /^(api_?key|apikey|secret|secret_?key|client_?secret|token|access_?token|auth_?token|password|passwd|private_?key|access_?key|bearer|authorization)$/;
/** Shapes of provider keys and tokens, wherever they appear. */
const secretValues: ReadonlyArray<[RegExp, string]> = [
  [/\bsk-(?:ant-|proj-)?[A-Za-z0-9_-]{16,}/, 'an OpenAI/Anthropic-style key (sk-…)'],
  [/\bAKIA[0-9A-Z]{16}\b/, 'an AWS access key'],
  [/\bgh[pousr]_[A-Za-z0-9]{30,}/, 'a GitHub token'],
  [/\bxox[abprs]-[A-Za-z0-9-]{10,}/, 'a Slack token'],
  [/\bAIza[0-9A-Za-z_-]{35}\b/, 'a Google API key'],
  [/\bhf_[A-Za-z0-9]{30,}/, 'a Hugging Face token'],
  [/\bBearer\s+[A-Za-z0-9._~+/-]{20,}/, 'a bearer token'],
  [/-----BEGIN [A-Z ]*PRIVATE KEY-----/, 'a private key'],
  [/\b[a-z][a-z0-9+.-]*:\/\/[^/\s:@]+:[^/\s@]+@/i, 'a password in a URL'],
];

/** Where the document holds what looks like a literal secret (its value is never repeated). */
export function literalSecrets(value: unknown, path: PropertyKey[] = [], out: string[] = []): string[] {
  if (out.length >= 20) return out;
  if (typeof value === 'string') {
    const key = path.length
      ? String(path[path.length - 1])
          .toLowerCase()
          .replace(/-/g, '_')
      : '';
    const hit = secretValues.find(([re]) => re.test(value));
    if (hit)
      out.push(
        `${formatPath(path)}: looks like ${hit[1]}; a file never holds a key — name its environment variable in the model catalogue (api_key_env) instead`,
      );
    else if (secretKey.test(key) && value.trim() !== '')
      out.push(
        `${formatPath(path)}: a literal secret; a file never holds a key — name its environment variable in the model catalogue (api_key_env) instead`,
      );
  } else if (Array.isArray(value)) value.forEach((v, i) => literalSecrets(v, [...path, i], out));
  else if (isPlainObject(value)) for (const [k, v] of Object.entries(value)) literalSecrets(v, [...path, k], out);
  return out;
}

// ---- unknown keys and their likely spelling ----------------------------------------------------

/** Edit distance counting a swap of two neighbours as one edit (optimal string alignment). */
function editDistance(a: string, b: string): number {
  const d: number[][] = Array.from({ length: a.length + 1 }, (_, i) =>
    Array.from({ length: b.length + 1 }, (_, j) => (i === 0 ? j : j === 0 ? i : 0)),
  );
  for (let i = 1; i <= a.length; i++) {
    for (let j = 1; j <= b.length; j++) {
      const cost = a[i - 1] === b[j - 1] ? 0 : 1;
      let v = Math.min(d[i - 1]![j]! + 1, d[i]![j - 1]! + 1, d[i - 1]![j - 1]! + cost);
      if (i > 1 && j > 1 && a[i - 1] === b[j - 2] && a[i - 2] === b[j - 1]) v = Math.min(v, d[i - 2]![j - 2]! + 1);
      d[i]![j] = v;
    }
  }
  return d[a.length]![b.length]!;
}

/** The known key a misspelt one most likely meant, if one is close enough. */
export function likelyKey(key: string, known: readonly string[]): string | undefined {
  const squash = (s: string) => s.toLowerCase().replace(/[_-]/g, '');
  const same = known.find((k) => squash(k) === squash(key));
  if (same) return same;
  let best: { key: string; d: number } | undefined;
  for (const k of known) {
    const d = editDistance(squash(key), squash(k));
    if (!best || d < best.d) best = { key: k, d };
  }
  return best && best.d <= Math.max(1, Math.floor(key.length / 4)) ? best.key : undefined;
}

/** The schema that `path` leads to, through optionals, defaults, arrays and pipes. */
function schemaAt(schema: z.ZodType, path: readonly PropertyKey[]): z.ZodType | undefined {
  let s: z.ZodType | undefined = schema;
  for (let i = 0; s !== undefined;) {
    if (s instanceof z.ZodOptional || s instanceof z.ZodNullable || s instanceof z.ZodDefault)
      s = s.unwrap() as z.ZodType;
    else if (s instanceof z.ZodPipe) s = (s.in instanceof z.ZodTransform ? s.out : s.in) as z.ZodType;
    else if (i === path.length) return s;
    else if (s instanceof z.ZodArray && typeof path[i] === 'number') {
      s = s.element as z.ZodType;
      i++;
    } else if (s instanceof z.ZodObject) {
      s = (s.shape as Record<string, z.ZodType>)[String(path[i])];
      i++;
    } else return undefined;
  }
  return undefined;
}

function knownKeysAt(path: readonly PropertyKey[]): readonly string[] {
  if (path.length === 1 && path[0] === 'config') return fileConfigKeys;
  const s = schemaAt(agentDocumentSchema, path);
  return s instanceof z.ZodObject ? Object.keys(s.shape as object) : [];
}

/** One line per issue: the field path, what is wrong, and for a misspelt key the likely one. */
export function describeIssues(issues: readonly z.core.$ZodIssue[], max = 20): string[] {
  const lines: string[] = [];
  for (const i of issues) {
    if (i.code === 'unrecognized_keys') {
      const known = knownKeysAt(i.path);
      for (const k of i.keys) {
        const guess = likelyKey(k, known);
        const where = formatPath([...i.path, k]);
        lines.push(
          `${where}: unknown key${guess ? ` (did you mean '${guess}'?)` : known.length ? ` (known here: ${known.join(', ')})` : ''}`,
        );
      }
      continue;
    }
    const missing = /^Invalid input: expected (\w+), received undefined$/.exec(i.message);
    lines.push(`${formatPath(i.path)}: ${missing ? `required (${missing[1]})` : i.message}`);
  }
  return lines.slice(0, max);
}

// ---- the document ------------------------------------------------------------------------------

/** Check a value already parsed (a workflow input from the Temporal UI, say) as an agent document. */
export function checkAgentDocument(raw: unknown): ParseResult {
  if (!isPlainObject(raw))
    return { ok: false, errors: ['(document): an agent file is a mapping of keys (id, name, goals, …)'] };
  const secrets = literalSecrets(raw);
  const r = agentDocumentSchema.safeParse(raw);
  if (r.success && secrets.length === 0) return { ok: true, document: r.data };
  // A secret's place is named once, as a secret (never as an unknown key with a value to echo).
  const at = new Set(secrets.map((s) => s.slice(0, s.indexOf(': '))));
  const issues = r.success
    ? []
    : describeIssues(r.error.issues).filter((line) => !at.has(line.slice(0, line.indexOf(': '))));
  return { ok: false, errors: [...secrets, ...issues].slice(0, 20) };
}

function readYaml(text: string): { ok: true; value: unknown } | { ok: false; errors: string[] } {
  const doc = parseDocument(text, { uniqueKeys: true, prettyErrors: true, strict: true });
  const problems = doc.errors.map((e) => {
    const message = /multiple documents/.test(e.message)
      ? 'one agent per file (no second document after ---)'
      : e.message.split('\n')[0]!.replace(/ at line \d+, column \d+:?$/, '');
    return `${e.linePos ? `line ${e.linePos[0].line}, column ${e.linePos[0].col}` : 'YAML'}: ${message}`;
  });
  if (problems.length) return { ok: false, errors: problems.slice(0, 10) };
  try {
    return { ok: true, value: doc.toJS({ maxAliasCount }) };
  } catch (err) {
    // yaml counts the nodes every alias expands to and stops past maxAliasCount.
    const message = (err as Error).message;
    return {
      ok: false,
      errors: [
        /alias/i.test(message)
          ? `YAML: too many aliases (at most ${maxAliasCount} expansions): ${message}`
          : `YAML: ${message}`,
      ],
    };
  }
}

/**
 * Parse the text of an agent file. `name` (the file's name) picks JSON for `*.json`; otherwise a
 * text that starts with `{` is JSON and anything else YAML.
 */
export function parseAgentFile(text: string, name = ''): ParseResult {
  const bytes = utf8Bytes(text);
  if (bytes > maxAgentFileBytes)
    return {
      ok: false,
      errors: [`${name || 'the file'} is ${bytes} bytes: an agent file may be at most ${maxAgentFileBytes} bytes`],
    };
  const json = name.toLowerCase().endsWith('.json') || (!/\.ya?ml$/i.test(name) && text.trimStart().startsWith('{'));
  let raw: unknown;
  if (json) {
    try {
      raw = JSON.parse(text);
    } catch (err) {
      return { ok: false, errors: [`JSON: ${(err as Error).message}`] };
    }
  } else {
    const y = readYaml(text);
    if (!y.ok) return y;
    raw = y.value;
  }
  return checkAgentDocument(raw);
}
