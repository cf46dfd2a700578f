/**
 * cli: how long `mindloop status <agent>` and `mindloop note <agent> <text>` take as a person
 * types them — a whole process each, start to exit — against a running agent on the embedded
 * stack with its notebook served, as `npm start` runs them, beside the Temporal CLI's `workflow
 * describe` of the same workflow in the same run (for scale: a compiled Go binary with nothing to
 * load). `status` and `note` are measured as they answer there (through the notebook) and with
 * `--direct` (their own Temporal client, as where no notebook runs).
 */
import { spawn } from 'node:child_process';
import { join } from 'node:path';
import { agents, llmRegistry } from '../db/schema/index.js';
import { createActivities } from '../activities/index.js';
import { resolveTool } from '../runtime/tools.js';
import { startNotebook, TickFeed } from '../runtime/notebook/index.js';
import type { Stack } from '../runtime/stack.js';
import type { agentLoopWorkflow } from '../workflows/agent-loop/index.js';
import { summarize, withBenchWorker } from './lib.js';
import { workflowFailover } from '../workflows/lib/activity-options.js';

const repoRoot = join(import.meta.dirname, '..');

/** Runs of each command after its warm-up run; `smoke`: one. */
export const cliSizes = { full: { runs: 10 }, smoke: { runs: 1 } };

/** Wall time of one command, start to exit; it must exit 0. */
function timed(cmd: string, args: string[], env: Record<string, string>): Promise<number> {
  return new Promise((resolve, reject) => {
    const started = performance.now();
    const child = spawn(cmd, args, {
      cwd: repoRoot,
      env: { ...process.env, ...env },
      stdio: ['ignore', 'ignore', 'pipe'],
    });
    let stderr = '';
    child.stderr.on('data', (d: Buffer) => (stderr += d.toString()));
    child.once('error', reject);
    child.once('exit', (code) =>
      code === 0
        ? resolve(performance.now() - started)
        : reject(new Error(`${cmd} ${args.join(' ')} exited with ${code}: ${stderr}`)),
    );
  });
}

async function series(label: string, n: number, once: () => Promise<number>): Promise<{ p50: number; p99: number }> {
  const samples: number[] = [];
  for (let i = 0; i < n; i++) samples.push(await once());
  const s = summarize(samples);
  process.stdout.write(
    `  ${label.padEnd(34)} p50 ${s.p50.toFixed(0).padStart(5)} ms   p99 ${s.p99.toFixed(0).padStart(5)} ms   (${n} runs)\n`,
  );
  return s;
}

export async function measureCli(
  stack: Stack,
  toolsDir: string,
  { runs } = cliSizes.full,
): Promise<Record<string, number>> {
  const agentId = 'bench-cli';
  await stack.db.db.insert(agents).values({ id: agentId, name: agentId }).onConflictDoNothing();
  await stack.db.db
    .insert(llmRegistry)
    .values({
      agentId,
      name: 'instant',
      provider: 'scripted' as const,
      model: 'instant',
      role: 'agent' as const,
      priority: 1,
      params: { replies: ['A quick thought.'] },
    })
    .onConflictDoNothing();
  const activities = createActivities({ db: stack.db.db, llm: { env: {}, toolsDir } });
  // The product's queue name: the CLI's updates are answered by this worker.
  return withBenchWorker(stack, { taskQueue: 'mindloop', activities }, async (client) => {
    // A slow heartbeat: the agent is alive and answers, but its ticks do not load the machine.
    const handle = await client.workflow.start<typeof agentLoopWorkflow>('agentLoopWorkflow', {
      ...workflowFailover,
      taskQueue: 'mindloop',
      workflowId: `agent/${agentId}`,
      args: [{ agentId, reflexes: false, settings: { delayMs: 60_000 } }],
    });
    const notebook = await startNotebook({
      db: stack.db.db,
      client,
      temporal: { address: stack.temporal.address, namespace: stack.temporal.namespace },
      feed: new TickFeed(),
      feedSource: 'in-process',
      port: 0,
      log: () => undefined,
    });
    try {
      const env = {
        TEMPORAL_ADDRESS: stack.temporal.address,
        DATABASE_URL: stack.database.url,
        MINDLOOP_TOOLS_DIR: toolsDir,
        NATS_URL: 'off',
        MINDLOOP_NOTEBOOK_PORT: String(notebook.port),
      };
      const mindloop = (...args: string[]) =>
        timed(process.execPath, [join(repoRoot, 'bin', 'mindloop.mjs'), ...args], env);
      // One run first: a cold file cache or a first transform is not what a person waits for twice.
      await mindloop('status', agentId);
      await mindloop('status', agentId, '--direct');
      const status = await series(`mindloop status ${agentId}`, runs, () => mindloop('status', agentId));
      const direct = await series(`mindloop status ${agentId} --direct`, runs, () =>
        mindloop('status', agentId, '--direct'),
      );
      let i = 0;
      const note = await series(`mindloop note ${agentId} …`, runs, () =>
        mindloop('note', agentId, `bench note ${++i}`),
      );
      const noteDirect = await series(`mindloop note ${agentId} … --direct`, runs, () =>
        mindloop('note', agentId, `bench note ${++i}`, '--direct'),
      );
      const temporal = resolveTool('temporal', { toolsDir });
      const describe = temporal
        ? await series('temporal workflow describe', runs, () =>
            timed(
              temporal,
              [
                'workflow',
                'describe',
                '--address',
                stack.temporal.address,
                '--namespace',
                stack.temporal.namespace,
                '-w',
                `agent/${agentId}`,
              ],
              {},
            ),
          )
        : { p50: Number.NaN, p99: Number.NaN };
      await handle.signal('stop');
      await handle.result();
      return {
        status_p50_ms: status.p50,
        status_p99_ms: status.p99,
        status_direct_p50_ms: direct.p50,
        status_direct_p99_ms: direct.p99,
        note_p50_ms: note.p50,
        note_p99_ms: note.p99,
        note_direct_p50_ms: noteDirect.p50,
        note_direct_p99_ms: noteDirect.p99,
        temporal_cli_p50_ms: describe.p50,
        status_ratio_vs_temporal_cli: status.p50 / describe.p50,
      };
    } finally {
      await notebook.close();
    }
  });
}
