/**
 * The one place that reads the environment. Everything else receives a typed `Env`.
 * A bad value prints the offending field and exits non-zero (see `loadEnvOrExit`).
 */
import { busRootSchema, defaultBusRoot, deploymentIdSchema } from './core/bus/subjects.js';
import { priceTableSchema } from './core/lifeforce.js';
import { formatIssues } from './core/zod-issues.js';
import { z } from 'zod';

const port = z.coerce.number().int().min(1).max(65535);
const bool = z
  .enum(['1', '0', 'true', 'false', 'yes', 'no'])
  .transform((v) => v === '1' || v === 'true' || v === 'yes');

/** The sticky cache's default: room for 600 agents, about 0.85 GB (a 2 000-agent worker stays under 1.5 GB). */
export const defaultWorkflowCache = 600;

export const envSchema = z
  .object({
    /** Existing Temporal frontend (host:port). Unset: the embedded dev server is started. */
    TEMPORAL_ADDRESS: z
      .string()
      .regex(/^[\w.-]+:\d+$/, 'expected host:port')
      .optional(),
    TEMPORAL_NAMESPACE: z.string().min(1).default('default'),
    /** PEM files for mTLS to a Temporal cluster (both or neither). */
    TEMPORAL_TLS_CERT: z.string().min(1).optional(),
    TEMPORAL_TLS_KEY: z.string().min(1).optional(),
    TEMPORAL_API_KEY: z.string().min(1).optional(),
    /** Embedded dev server ports. */
    TEMPORAL_PORT: port.default(7233),
    TEMPORAL_UI_PORT: port.default(8233),
    /** Postgres connection string. Unset: embedded PGlite served on PGLITE_PORT. */
    DATABASE_URL: z
      .string()
      .regex(/^postgres(ql)?:\/\//, 'expected a postgres:// URL')
      .optional(),
    PGLITE_PORT: port.default(54329),
    DATABASE_POOL_MAX: z.coerce.number().int().min(1).max(100).default(10),
    /** Where the embedded stack keeps its state. */
    MINDLOOP_DATA_DIR: z.string().min(1).default('.data'),
    /** Where pinned binaries (Temporal CLI, test server) and the local model live. */
    MINDLOOP_TOOLS_DIR: z.string().min(1).default('.tools'),
    /** Explicit binary paths win over `.tools/` and PATH. */
    TEMPORAL_CLI_PATH: z.string().min(1).optional(),
    TEMPORAL_TEST_SERVER_PATH: z.string().min(1).optional(),
    /**
     * Which task queues this process serves (comma list). `mindloop` and `sandbox` are polled by
     * TypeScript workers in this process; the speech queues by the Python speech engine, which the
     * process starts as a child: `speech` lets it poll `speech-gpu` when CUDA is usable and
     * `speech-cpu` otherwise, `speech-gpu` / `speech-cpu` pin it to that queue (and device).
     */
    MINDLOOP_QUEUES: z
      .string()
      .transform((s) =>
        s
          .split(',')
          .map((q) => q.trim())
          .filter(Boolean),
      )
      .pipe(z.array(z.enum(['mindloop', 'sandbox', 'speech', 'speech-gpu', 'speech-cpu'])).min(1))
      .refine(
        (qs) => qs.filter((q) => q.startsWith('speech')).length <= 1,
        'name at most one speech queue (speech, speech-gpu or speech-cpu): one engine per process',
      )
      .default(['mindloop', 'sandbox', 'speech']),
    /** Per-attempt timeout of an LLM call before failing over to the next registry row. */
    MINDLOOP_LLM_TIMEOUT_MS: z.coerce.number().int().min(100).max(600_000).default(60_000),
    /** Cap on one model answer (text and tool calls) in UTF-8 bytes; the rest is dropped and the cut recorded in llm_calls. */
    MINDLOOP_LLM_MAX_REPLY_BYTES: z.coerce
      .number()
      .int()
      .min(1024)
      .max(64 * 1024 * 1024)
      .default(256 * 1024),
    /** CPU threads of the local model (node-llama-cpp); default half the cores. */
    MINDLOOP_LOCAL_LLM_THREADS: z.coerce.number().int().min(1).max(256).optional(),
    /**
     * Workflows a `mindloop` worker keeps in memory between their tasks (the sticky cache). Each
     * costs about 1.4 MB; one evicted (least recently used first) is replayed from its history on
     * its next task. Size it to the agents that tick; idle ones can wait outside it.
     */
    MINDLOOP_WORKFLOW_CACHE: z.coerce.number().int().min(2).max(100_000).default(defaultWorkflowCache),
    /** A workflow bundle built ahead of time (`npm run build:workflows`): workers skip webpack at start. */
    MINDLOOP_WORKFLOW_BUNDLE: z.string().min(1).optional(),
    DOCKER_HOST: z.string().min(1).optional(),
    /** A JSON file `{disable: [rule ids], add: [rules]}` adjusting the danger-zone rules (core/danger-zones.ts). */
    MINDLOOP_DANGER_RULES: z.string().min(1).optional(),
    /** development: agents may generate tools (Ouroboros); production: only with MINDLOOP_ALLOW_TOOLGEN. */
    MINDLOOP_MODE: z.enum(['development', 'production']).default('development'),
    /** The admin override that lets production generate tools. */
    MINDLOOP_ALLOW_TOOLGEN: bool.default(false),
    /** JSON overriding fields of the lifeforce price table (core/lifeforce.ts), e.g. `{"lfPerUsd":500}`. */
    MINDLOOP_LIFEFORCE_PRICES: z
      .string()
      .transform((text, ctx) => {
        try {
          return JSON.parse(text) as unknown;
        } catch {
          ctx.addIssue({ code: 'custom', message: 'expected a JSON object of prices' });
          return z.NEVER;
        }
      })
      .pipe(priceTableSchema)
      .default(priceTableSchema.parse({})),
    /**
     * The message bus (NATS; comma list for a cluster), e.g. nats://127.0.0.1:4222: workers
     * publish tick heartbeats and events, consume agent commands and run the echo agent. Unset:
     * the NATS answering on 127.0.0.1:4222, else (`npm start` only) a nats-server binary started
     * as a child; `off`: no bus (runtime/nats-server.ts).
     */
    NATS_URL: z
      .string()
      .regex(
        /^(?:off|(?:(?:nats|tls):\/\/)?[^\s,/]+(?:,(?:(?:nats|tls):\/\/)?[^\s,/]+)*)$/,
        'expected nats://host:port (comma-separated for a cluster), or off',
      )
      .optional(),
    /** The root every bus subject lives under (`<root>.<deployment>.low.agent.<id>`…). */
    MINDLOOP_BUS_ROOT: busRootSchema.default(defaultBusRoot),
    /**
     * This deployment's name on the bus. Unset (the usual case): derived from the Temporal
     * namespace it serves (runtime/deployment.ts), so every process of one deployment agrees
     * without configuration. Set it only to name a deployment, the same in all of its processes.
     */
    MINDLOOP_DEPLOYMENT: deploymentIdSchema.optional(),
    /**
     * The other deployments whose commands this one takes (comma list of deployment ids; see
     * `mindloop bus info`). Empty, the default: none; a command from another deployment is refused.
     */
    MINDLOOP_BUS_PEERS: z
      .string()
      .default('')
      .transform((v) =>
        v
          .split(',')
          .map((t) => t.trim())
          .filter(Boolean),
      )
      .pipe(z.array(deploymentIdSchema).max(100)),
    /** The bearer token `mindloop mcp --http` requires of every request (as --token); needed to bind a non-loopback address. */
    MINDLOOP_MCP_TOKEN: z
      .string()
      .regex(/^[\x21-\x7e]{16,512}$/, 'at least 16 visible ASCII characters, no spaces (e.g. `openssl rand -hex 32`)')
      .optional(),
    /** The notebook (the web page `npm start` serves): its port, or `off` for none. */
    MINDLOOP_NOTEBOOK_PORT: z
      .union([z.literal('off'), port], { error: 'expected a port (1–65535), or off' })
      .default(8234),
    /** The address the notebook binds; anything but a loopback address needs MINDLOOP_NOTEBOOK_TOKEN. */
    MINDLOOP_NOTEBOOK_HOST: z
      .string()
      .regex(/^(?:[A-Za-z0-9.-]{1,253}|\[?[0-9A-Fa-f:.]{2,45}\]?)$/, 'expected a host name or an IP address')
      .default('127.0.0.1'),
    /** The token every notebook request must carry (open `/?token=<token>` once; the page keeps it in a cookie). */
    MINDLOOP_NOTEBOOK_TOKEN: z
      .string()
      .regex(/^[\x21-\x7e]{16,512}$/, 'at least 16 visible ASCII characters, no spaces (e.g. `openssl rand -hex 32`)')
      .optional(),
    LOG_LEVEL: z.enum(['TRACE', 'DEBUG', 'INFO', 'WARN', 'ERROR']).default('INFO'),
    MINDLOOP_VERBOSE: bool.default(false),
  })
  .refine((e) => Boolean(e.TEMPORAL_TLS_CERT) === Boolean(e.TEMPORAL_TLS_KEY), {
    message: 'TEMPORAL_TLS_CERT and TEMPORAL_TLS_KEY must be set together',
    path: ['TEMPORAL_TLS_CERT'],
  });

export type Env = z.infer<typeof envSchema>;
export type TaskQueueName = Env['MINDLOOP_QUEUES'][number];

/** Parse an environment object; returns the zod result so callers decide how to fail. */
export function parseEnv(source: Record<string, string | undefined> = process.env) {
  // Empty strings mean "unset": a common shell habit (`DATABASE_URL= npm start`).
  const cleaned = Object.fromEntries(Object.entries(source).filter(([, v]) => v !== undefined && v !== ''));
  return envSchema.safeParse(cleaned);
}

/** Format zod issues as one line per field, e.g. `PGLITE_PORT: Too big: expected number to be <=65535`. */
export function formatEnvErrors(error: z.ZodError): string {
  return formatIssues(error, '(env)', { max: 50, separator: '\n' }).replace(/^|\n/g, (m) => `${m}  `);
}

/** Load the environment or print the bad fields and exit with status 2. */
export function loadEnvOrExit(source: Record<string, string | undefined> = process.env): Env {
  const result = parseEnv(source);
  if (!result.success) {
    process.stderr.write(`mindloop: invalid environment\n${formatEnvErrors(result.error)}\n`);
    process.exit(2);
  }
  return result.data;
}

/**
 * The raw environment, for the one lookup that cannot be typed ahead: the API key an
 * `llm_registry` row names by variable (`api_key_env`). Composition roots pass it down.
 */
export function secretSource(): Readonly<Record<string, string | undefined>> {
  return process.env;
}
