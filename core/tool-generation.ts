/**
 * Tool self-generation (Ouroboros) as data: the workflow input, the structured
 * answer the LLM must give (module + tests), the typed reasons a generation ends without a
 * tool, and the prompt. Pure; the workflow and the activities import it.
 */
import { formatIssues } from './zod-issues.js';
import { z } from 'zod';
import { agentIdSchema } from './ids.js';

const toolNamePattern = /^[a-z][a-z0-9_]{1,47}$/;
const capabilityPattern = /^[a-z][a-z0-9_.-]{1,63}$/;

/** Why a generation produced no tool; each is tested. */
const toolGenerationFailures = [
  /** Production mode without the admin override. */
  'policy_refused',
  /** The LLM's answer is not the JSON object asked for. */
  'malformed_reply',
  /** The static safety check found forbidden code. */
  'unsafe_code',
  /** Its tests ran in the sandbox and failed. */
  'tests_failed',
  /** Its tests ran past their wall-clock budget. */
  'tests_timeout',
  /** The sandbox could not run them (no Docker host, image missing…). */
  'sandbox_error',
] as const;
type ToolGenerationFailure = (typeof toolGenerationFailures)[number];

const toolModes = ['development', 'production'] as const;
export type ToolMode = (typeof toolModes)[number];

export const toolGenerationInput = z.strictObject({
  agentId: agentIdSchema,
  /** The capability no registered tool has, e.g. `text.word_frequencies`. */
  capability: z
    .string()
    .trim()
    .regex(capabilityPattern, 'lowercase letters, digits, "_", "." and "-", starting with a letter (2–64)'),
  description: z.string().trim().min(1).max(4000),
  /** The mode; unset = the worker's MINDLOOP_MODE (asked through an activity: workflows never read env). A production worker stays production. */
  mode: z.enum(toolModes).optional(),
  /** An admin's explicit permission for production mode (MINDLOOP_ALLOW_TOOLGEN=1 on the worker also counts). */
  adminOverride: z.boolean().default(false),
  /** Who asked: the LLM role that writes the tool. */
  role: z.enum(['agent', 'oversight', 'task']).default('agent'),
  /** Wall clock for the tool's tests in the sandbox. */
  testTimeoutMs: z.number().int().min(1000).max(600_000).default(60_000),
  /** The tick/command that asked, so the loop can tell the agent what came of it. */
  requestedBy: z
    .strictObject({
      workflowId: z.string().min(1).max(300),
      tick: z.number().int().min(0),
      cmdId: z.string().min(1).max(100),
    })
    .optional(),
});
export type ToolGenerationInput = z.input<typeof toolGenerationInput>;

/** What the LLM must answer: one JSON object. */
const generatedToolSchema = z.strictObject({
  name: z.string().regex(toolNamePattern, 'snake_case, starting with a letter, 2–48 characters'),
  description: z.string().trim().min(1).max(1000),
  /** The tool: an ES module (tool.mjs) exporting `run(input)`. */
  module: z.string().min(1).max(64_000),
  /** Its tests: an ES module (tool.test.mjs) importing './tool.mjs', run with `node --test`. */
  tests: z.string().min(1).max(64_000),
});
export type GeneratedTool = z.infer<typeof generatedToolSchema>;

/** JSON schema of the answer (for providers that constrain output to a grammar). */
export const generatedToolJsonSchema = {
  type: 'object',
  additionalProperties: false,
  required: ['name', 'description', 'module', 'tests'],
  properties: {
    name: { type: 'string', pattern: toolNamePattern.source },
    description: { type: 'string' },
    module: { type: 'string' },
    tests: { type: 'string' },
  },
} as const;

export type ToolGenerationResult =
  | {
      ok: true;
      tool: { id: number; name: string; capability: string; description: string; version: number };
      auditId: number;
    }
  | { ok: false; reason: ToolGenerationFailure; message: string; auditId: number | null; details?: unknown };

/** The prompt that asks for the tool. */
export function toolPrompt(capability: string, description: string): string {
  return [
    `You write a new tool for an agent. It needs the capability "${capability}": ${description}`,
    'Write an ES module `tool.mjs` that exports `async function run(input)` returning JSON-serialisable output, and tests `tool.test.mjs` that import it from "./tool.mjs" and use node:test and node:assert/strict.',
    'Rules (a static checker enforces them; a violation rejects the tool): no child_process, net, http(s), http2, dgram, tls, dns, worker_threads, vm, cluster or module imports; no fetch/WebSocket; no eval, Function, Reflect or Proxy; no require()/import() of computed names; no process.binding/dlopen; fs only to read; no `.constructor`/`__proto__`; property names must not be assembled from string pieces. Only node built-ins for pure computation (assert, buffer, crypto, events, path, querystring, string_decoder, url, util, zlib).',
    'Answer with ONE JSON object and nothing else: {"name": "<snake_case>", "description": "<one sentence>", "module": "<tool.mjs source>", "tests": "<tool.test.mjs source>"}',
  ].join('\n\n');
}

/** Parse the LLM's answer: code fences tolerated; anything else is `malformed_reply` with the fields named. */
export function parseGeneratedTool(text: string): { ok: true; tool: GeneratedTool } | { ok: false; message: string } {
  const body = text
    .trim()
    .replace(/^```(?:json)?\s*/i, '')
    .replace(/\s*```$/, '');
  let value: unknown;
  try {
    value = JSON.parse(body);
  } catch (err) {
    return { ok: false, message: `the answer is not JSON (${(err as Error).message}): ${text.slice(0, 120)}` };
  }
  const r = generatedToolSchema.safeParse(value);
  if (!r.success)
    return {
      ok: false,
      message: `the answer does not match {name, description, module, tests}: ${formatIssues(r.error, '(answer)')}`,
    };
  return { ok: true, tool: r.data };
}

/** The note the requesting agent gets when a generation ends (the original intent proceeds from it). */
export function toolResultNote(capability: string, r: ToolGenerationResult): string {
  if (r.ok)
    return `Tool ${r.tool.name} (#${r.tool.id}, v${r.tool.version}) is ready for ${capability}: ${r.tool.description} You can retry what you needed it for.`;
  return `No tool for ${capability}: ${r.reason} — ${r.message.slice(0, 1500)}`;
}
