/**
 * No model reply can break a database write or a Temporal payload: a REAL agent loop (Temporal
 * dev server, real Postgres, the real activities) whose only agent LLM is an OpenAI-compatible
 * endpoint (the local fake server) answering with hostile replies, one after another — NUL
 * bytes, lone surrogates in text and in command args, invalid UTF-8, 1 MB and 5 MB replies,
 * 1 000 and 10 000 commands, 10 000-deep JSON, an unknown tool with 1 MB of arguments, HTTP 500
 * and a hang (Core Outage, then recovery). The mini-prompts (emotion, novelty, validator) answer
 * with NUL bytes and lone surrogates too. After each: the loop ticks on and stays RUNNING, no
 * reply is stored at full size, and no payload in the workflow's history reaches 64 KB.
 */
import { Client, Connection, type WorkflowHandle } from '@temporalio/client';
import { NativeConnection, Worker } from '@temporalio/worker';
import { and, desc, eq, sql } from 'drizzle-orm';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createActivities } from '../../activities/index.js';
import type { ScriptedReplyFn } from '../../activities/llm/index.js';
import { renderCommandBlock } from '../../core/reply-parser.js';
import { defaultMaxReplyBytes } from '../../core/sanitize.js';
import { agents, llmCalls, llmRecentResponses, llmRegistry } from '../../db/schema/index.js';
import { startStack, type Stack } from '../../runtime/stack.js';
import { bundleWorkflows } from '../../workers/queues.js';
import type { AgentStatus, agentLoopWorkflow } from '../../workflows/agent-loop/index.js';
import { freePort, freshPostgresDatabase, repoToolsDir, tempDir, testEnv } from '../helpers/env.js';
import {
  chatCompletion,
  startFakeOpenAiServer,
  type FakeOpenAiServer,
  type RawReply,
} from '../helpers/fake-openai-server.js';
import { waitFor } from '../helpers/worker-process.js';
import { failoverWorkerOptions } from '../../workers/failover.js';

const agentId = 'hostile';
const historyPayloadLimit = 64 * 1024;
const data = tempDir('hostile');
let stack: Stack;
let client: Client;
let llm: FakeOpenAiServer;
let worker: Worker;
let running: Promise<void>;
let connection: NativeConnection;
let dropDb: () => Promise<void>;
let h: WorkflowHandle<typeof agentLoopWorkflow>;
/** The agent row's own reply cap (`params.maxReplyBytes`) while a case sets one. */
let rowCap: number | undefined;

/** The mini-prompts answer in their formats, with NUL bytes and lone surrogates inside. */
const miniPrompts: ScriptedReplyFn = ({ purpose }) => {
  if (purpose === 'emotion') return 'curiosity:4 (new\u0000 things\ud800)\njoy\u0085:2 (\udc00)';
  if (purpose === 'novelty')
    return '{"novelty": 60, "new": ["an idea\u0000", "x\ud800"], "refined": [], "discarded": [], "tags": ["t\u0000\udfff"]}';
  return '+2 -- sound\u0000 and safe\ud800';
};

const status = () => h.query<AgentStatus>('status');

/** The largest payload (bytes) anywhere in the workflow's history, and how many there are. */
async function historyPayloads(): Promise<{ largest: number; where: string; count: number }> {
  const history = await h.fetchHistory();
  let largest = 0;
  let where = '';
  let count = 0;
  const walk = (v: unknown, path: string): void => {
    if (!v || typeof v !== 'object' || v instanceof Uint8Array) return;
    const o = v as Record<string, unknown>;
    if (o.data instanceof Uint8Array && 'metadata' in o) {
      count++;
      if (o.data.length > largest) [largest, where] = [o.data.length, path];
      return;
    }
    for (const [k, x] of Object.entries(o)) walk(x, `${path}.${k}`);
  };
  for (const e of history.events ?? []) walk(e, `event ${String(e.eventId)}`);
  return { largest, where, count };
}

/** Serve the hostile answers, wait until they were asked for, and until the loop ticked twice more after. */
async function survive(replies: RawReply[], opts: { outage?: boolean } = {}): Promise<{ tick: number }> {
  const before = await status();
  const [{ lastId } = { lastId: 0 }] = await stack.db.db
    .select({ lastId: sql<number>`coalesce(max(${llmCalls.id}), 0)::int` })
    .from(llmCalls);
  const served = llm.rawServed();
  llm.serveRaw(...replies);
  await waitFor('the hostile answers asked for', 60_000, async () =>
    llm.rawServed() >= served + replies.length ? true : undefined,
  );
  const at = (await status()).tick;
  const after = await waitFor('two more ticks, in normal mode', 90_000, async () => {
    const s = await status();
    return s.tick >= at + 2 && s.operatingMode === 'normal' ? s : undefined;
  });
  if (opts.outage) expect(after.counters.outages).toBeGreaterThan(before.counters.outages);
  const described = await h.describe();
  expect(described.status.name).toBe('RUNNING');
  const payloads = await historyPayloads();
  expect(payloads.count).toBeGreaterThan(0);
  expect(payloads.largest, `largest payload at ${payloads.where}`).toBeLessThan(historyPayloadLimit);
  // Nothing stored beyond the cap (rows of this case): a reply in llm_calls at most the cap, the
  // recorded reply (text + its tool calls as a command block) at most the cap plus the rendered block.
  const [sizes] = await stack.db.db
    .select({
      call: sql<number>`coalesce(max(octet_length(${llmCalls.reply})), 0)::int`,
      meta: sql<number>`coalesce(max(octet_length(${llmCalls.metadata}::text)), 0)::int`,
    })
    .from(llmCalls)
    .where(and(eq(llmCalls.agentId, agentId), sql`${llmCalls.id} > ${lastId}`));
  const [stored] = await stack.db.db
    .select({ content: sql<number>`coalesce(max(octet_length(${llmRecentResponses.content})), 0)::int` })
    .from(llmRecentResponses)
    .where(and(eq(llmRecentResponses.agentId, agentId), sql`${llmRecentResponses.tick} > ${before.tick}`));
  const cap = rowCap ?? defaultMaxReplyBytes;
  expect(sizes!.call).toBeLessThanOrEqual(cap);
  expect(sizes!.meta).toBeLessThanOrEqual(cap + 4096);
  expect(stored!.content).toBeLessThanOrEqual(cap + 64 * 1024);
  return { tick: at };
}

async function setRowCap(bytes: number | undefined): Promise<void> {
  rowCap = bytes;
  await stack.db.db
    .update(llmRegistry)
    .set({ params: { timeoutMs: 3000, ...(bytes ? { maxReplyBytes: bytes } : {}) } })
    .where(and(eq(llmRegistry.agentId, agentId), eq(llmRegistry.role, 'agent')));
}

/** The latest ok think call whose reply starts with `prefix`. */
async function thinkReplying(prefix: string) {
  const [row] = await stack.db.db
    .select()
    .from(llmCalls)
    .where(
      and(
        eq(llmCalls.agentId, agentId),
        eq(llmCalls.purpose, 'think'),
        eq(llmCalls.ok, true),
        sql`${llmCalls.reply} like ${`${prefix}%`}`,
      ),
    )
    .orderBy(desc(llmCalls.id))
    .limit(1);
  expect(row, `a think call replying "${prefix}…"`).toBeDefined();
  return row!;
}

const completion = (
  content: string | null,
  toolCalls?: Array<{ id: string; name: string; arguments: string }>,
): RawReply => ({ body: chatCompletion(content, toolCalls) });

beforeAll(async () => {
  const fresh = await freshPostgresDatabase('mindloop_hostile');
  dropDb = fresh.drop;
  stack = await startStack({
    env: testEnv({ MINDLOOP_DATA_DIR: data.path, TEMPORAL_PORT: await freePort(), DATABASE_URL: fresh.url }),
    ui: false,
  });
  client = new Client({ connection: await Connection.connect(stack.temporal.connection) });
  llm = await startFakeOpenAiServer({ fixtures: ['openai-think'] });
  await stack.db.db.insert(agents).values({ id: agentId, name: 'Hostile' });
  await stack.db.db.insert(llmRegistry).values([
    {
      agentId,
      name: 'fake-openai',
      provider: 'openai',
      model: 'gpt-fake',
      role: 'agent',
      priority: 1,
      baseUrl: llm.baseUrl,
      params: { timeoutMs: 3000 },
    },
    { agentId, name: 'mini-emotion', provider: 'scripted', model: 'hostile-mini', role: 'emotion', priority: 1 },
    { agentId, name: 'mini-novelty', provider: 'scripted', model: 'hostile-mini', role: 'novelty', priority: 1 },
    { agentId, name: 'mini-validator', provider: 'scripted', model: 'hostile-mini', role: 'validator', priority: 1 },
  ]);
  connection = await NativeConnection.connect(stack.temporal.connection);
  worker = await Worker.create({
    connection,
    taskQueue: 'hostile-it',
    ...failoverWorkerOptions,
    workflowBundle: await bundleWorkflows(),
    activities: createActivities({
      db: stack.db.db,
      llm: { env: {}, toolsDir: repoToolsDir, scriptedReply: miniPrompts },
    }),
  });
  running = worker.run();
  h = await client.workflow.start<typeof agentLoopWorkflow>('agentLoopWorkflow', {
    taskQueue: 'hostile-it',
    workflowId: `agent/${agentId}`,
    args: [{ agentId, settings: { delayMs: 100 } }],
  });
  await waitFor('the first tick', 60_000, async () => ((await status()).tick >= 1 ? true : undefined));
}, 240_000);

afterAll(async () => {
  try {
    await h?.signal('stop');
    await h?.result();
  } catch {
    // the assertions already failed; clean up regardless
  }
  worker?.shutdown();
  await running?.catch(() => undefined);
  await connection?.close();
  await llm?.close();
  await client?.connection.close();
  await stack?.stop();
  await dropDb?.();
  data.remove();
});

describe('hostile replies against a real agent loop', () => {
  it('NUL bytes in the reply, three times running, are dropped and the text is kept', async () => {
    // Three different replies (the reflexes store an identical one as a placeholder).
    const nul = (i: number) =>
      completion(
        `I think\u0000 about NULs (${i}).\u0000\n${renderCommandBlock([{ cmdId: 'n1', type: 'diary.add', args: { title: `nul\u0000 title ${i}`, content: 'c\u0000' } }])}`,
      );
    const { tick } = await survive([nul(1), nul(2), nul(3)]);
    const rows = await stack.db.db.select().from(llmRecentResponses).where(eq(llmRecentResponses.agentId, agentId));
    const withNul = rows.filter((r) => r.content.includes('about NULs'));
    expect(withNul.map((r) => r.content.split('\n')[0]).sort()).toEqual(
      [1, 2, 3].map((i) => `I think about NULs (${i}).`),
    );
    const diary = await stack.db.db.execute<{ title: string }>(
      sql`select title from diary_entries where agent_id = ${agentId} and title like 'nul%' order by title`,
    );
    expect(diary.rows.map((d) => d.title)).toEqual([1, 2, 3].map((i) => `nul title ${i}`));
    expect(tick).toBeGreaterThan(0);
  });

  it('lone surrogates in the text, in command args (JSON escapes) and in native tool-call args', async () => {
    const text = `x\ud800 text \udc00\n<<<COMMANDS\n[{"cmd_id":"s1","type":"diary.add","args":{"title":"x\\ud800","content":"\\udfff y"}}]\nCOMMANDS>>>`;
    await survive([
      completion(text, [
        { id: 'call_s2', name: 'discover_tools', arguments: '{"action":"list","args":{"q\\ud800":"\\udc00"}}' },
      ]),
    ]);
    const log = await stack.db.db.execute<{ n: number }>(
      sql`select count(*)::int as n from command_log where agent_id = ${agentId} and cmd_id = 's1'`,
    );
    expect(log.rows[0]!.n).toBeGreaterThanOrEqual(1);
  });

  it('invalid UTF-8 bytes in the body', async () => {
    const [head, tail] = JSON.stringify(chatCompletion('bad bytes: @@ end')).split('@@') as [string, string];
    const body = Buffer.concat([
      Buffer.from(head, 'utf8'),
      Buffer.from([0xff, 0xfe, 0xc3, 0x28, 0xed, 0xa0, 0x80]),
      Buffer.from(tail, 'utf8'),
    ]);
    await survive([{ body }]);
    const stored = await stack.db.db
      .select()
      .from(llmRecentResponses)
      .where(and(eq(llmRecentResponses.agentId, agentId), sql`${llmRecentResponses.content} like 'bad bytes:%'`));
    expect(stored).toHaveLength(1);
    expect(stored[0]!.content).toMatch(/^bad bytes: \uFFFD+\(\uFFFD* end/);
  });

  for (const mb of [1, 5]) {
    it(`a ${mb} MB reply is cut at the cap, the cut recorded, and stored nowhere at full size`, async () => {
      const big = `${mb} MB of words. ${'lorem ipsum '.repeat(Math.ceil((mb * 1_000_000) / 12))}`;
      const { tick } = await survive([completion(big)]);
      const [call] = await stack.db.db
        .select()
        .from(llmCalls)
        .where(
          and(
            eq(llmCalls.agentId, agentId),
            eq(llmCalls.purpose, 'think'),
            eq(llmCalls.ok, true),
            sql`${llmCalls.reply} like ${`${mb} MB of words.%`}`,
          ),
        );
      expect(call!.metadata?.truncated).toMatchObject({
        originalBytes: Buffer.byteLength(big),
        keptBytes: defaultMaxReplyBytes,
      });
      expect(Buffer.byteLength(call!.reply!)).toBe(defaultMaxReplyBytes);
      const [resp] = await stack.db.db
        .select()
        .from(llmRecentResponses)
        .where(and(eq(llmRecentResponses.agentId, agentId), eq(llmRecentResponses.tick, call!.tick!)));
      // Both copies together are still well under the original: neither table holds it whole.
      expect(Buffer.byteLength(resp!.content) + Buffer.byteLength(call!.reply!)).toBeLessThan(Buffer.byteLength(big));
      expect(tick).toBeGreaterThan(0);
    });
  }

  it('1 000 commands: 50 run, the rest reported in one rejection', async () => {
    const many = Array.from({ length: 1000 }, (_, i) => ({ cmdId: `h${i}`, type: 'help', args: {} }));
    await survive([completion(`A thousand.\n${renderCommandBlock(many)}`)]);
    const think = await thinkReplying('A thousand.');
    const log = await stack.db.db.execute<{ n: number }>(
      sql`select count(*)::int as n from command_log where agent_id = ${agentId} and tick = ${think.tick} and cmd_id like 'h%'`,
    );
    expect(log.rows[0]!.n).toBe(50);
    const rejected = await stack.db.db.execute<{ reason: string }>(
      sql`select reason from command_log where agent_id = ${agentId} and tick = ${think.tick} and cmd_id like '!rejected.%'`,
    );
    expect(rejected.rows.map((r) => r.reason)).toEqual(['950 more commands dropped: at most 50 commands in one reply']);
  });

  it('10 000 commands (with a per-row cap of 1 MB, so they all arrive)', async () => {
    await setRowCap(1024 * 1024);
    try {
      const many = Array.from({ length: 10_000 }, (_, i) => ({ cmdId: `k${i}`, type: 'help', args: {} }));
      const text = `Ten thousand.\n${renderCommandBlock(many)}`;
      expect(Buffer.byteLength(text)).toBeGreaterThan(defaultMaxReplyBytes);
      await survive([completion(text)]);
      const think = await thinkReplying('Ten thousand.');
      expect(think.reply).toBe(text);
      const log = await stack.db.db.execute<{ n: number }>(
        sql`select count(*)::int as n from command_log where agent_id = ${agentId} and tick = ${think.tick} and cmd_id like 'k%'`,
      );
      expect(log.rows[0]!.n).toBe(50);
    } finally {
      await setRowCap(undefined);
    }
  });

  it('10 000-deep JSON in a command block and in tool-call arguments', async () => {
    const deep = `${'['.repeat(10_000)}${']'.repeat(10_000)}`;
    const text = `Deep.\n<<<COMMANDS\n[{"cmd_id":"d1","type":"diary.add","args":{"x":${deep}}}]\nCOMMANDS>>>`;
    await survive([
      completion(text, [
        { id: 'call_deep', name: 'discover_tools', arguments: `{"action":"list","args":{"x":${deep}}}` },
      ]),
    ]);
  });

  it('an unknown tool with 1 MB of arguments', async () => {
    await survive([
      completion('Calling a tool I do not have.', [
        {
          id: 'call_big',
          name: 'no_such_tool',
          arguments: `{"action":"x","args":{"blob":"${'b'.repeat(1_000_000)}"}}`,
        },
      ]),
    ]);
    const think = await thinkReplying('Calling a tool I do not have.');
    expect(think.metadata?.truncated).toMatchObject({ originalBytes: expect.any(Number) });
    expect((think.metadata!.truncated as { originalBytes: number }).originalBytes).toBeGreaterThan(1_000_000);
    expect(JSON.stringify(think.metadata).length).toBeLessThan(8 * 1024);
  });

  it('HTTP 500: Core Outage, then recovery', async () => {
    await survive(
      [
        {
          status: 500,
          body: { error: { message: 'internal\u0000 error', type: 'server_error', param: null, code: null } },
        },
      ],
      { outage: true },
    );
  });

  it('a hang: the call times out, Core Outage, then recovery', async () => {
    await survive([{ hang: true }], { outage: true });
  });

  it('no write failed on model text along the way', async () => {
    const failed = await stack.db.db
      .select({ error: llmCalls.error })
      .from(llmCalls)
      .where(and(eq(llmCalls.agentId, agentId), eq(llmCalls.ok, false)));
    expect(
      failed
        .map((f) => f.error)
        .filter((e) => /22021|22P02|22P05|invalid byte sequence|unsupported Unicode/i.test(e ?? '')),
    ).toEqual([]);
    expect(failed.every((f) => !(f.error ?? '').includes('\u0000'))).toBe(true);
    expect((await h.describe()).status.name).toBe('RUNNING');
  });
});
