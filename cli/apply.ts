/**
 * `mindloop apply -f <file|folder>`: agents from agent files. A new agent is written in one
 * transaction and its loop started; a running agent gets the file through its loop's
 * `applyAgentFile` update (validated, recorded with who and when); a stopped one is written and
 * started again. Every file of a folder is read and checked before anything is applied: one bad
 * file and nothing changes. `mindloop agents export <id>` writes the file of an agent.
 */
import { readdir, readFile, stat, writeFile } from 'node:fs/promises';
import { userInfo } from 'node:os';
import { basename, extname, join } from 'node:path';
import { WorkflowNotFoundError, type Client } from '@temporalio/client';
import type { Command } from 'commander';
import { desc, eq } from 'drizzle-orm';
import {
  applyAgentFileTo,
  readLiveDocument,
  type ApplyAgentFileInput,
  type ApplyAgentFileResult,
} from '../activities/agent-file.js';
import { maxAgentFileBytes, parseAgentFile, renderAgentFile, type AgentDocument } from '../core/agent-file/index.js';
import { workflowIds } from '../core/ids.js';
import type { Db } from '../db/client.js';
import { agentFiles, agents } from '../db/schema/index.js';
import { loadEnvOrExit } from '../env.js';
import { resolveDeployment } from '../runtime/deployment.js';
import { startAgentLoop } from '../runtime/workflow-starts.js';
import type { ApplyAgentFileRequest } from '../workflows/agent-loop/messages.js';
import { updateRefusal, withClient, withDb } from './client.js';

const out = (s: string) => process.stdout.write(`${s}\n`);
const fileExtensions = new Set(['.yaml', '.yml', '.json']);

interface AgentFile {
  path: string;
  document: AgentDocument;
}

/** The files a path names: the file, or every agent file of the folder (by name). */
async function filesAt(path: string): Promise<string[]> {
  const s = await stat(path).catch(() => null);
  if (!s) throw new Error(`${path}: no such file or folder`);
  if (!s.isDirectory()) return [path];
  const names = (await readdir(path)).filter((n) => fileExtensions.has(extname(n).toLowerCase())).sort();
  if (names.length === 0) throw new Error(`${path}: no agent files (*.yaml, *.yml, *.json) in the folder`);
  return names.map((n) => join(path, n));
}

/** Read and check every file; all the reasons they are refused at once, nothing applied. */
export async function readAgentFiles(path: string): Promise<AgentFile[]> {
  const files: AgentFile[] = [];
  const problems: string[] = [];
  for (const p of await filesAt(path)) {
    // Refused by its size before it is read: a 10 GB file is never loaded.
    const size = (await stat(p)).size;
    if (size > maxAgentFileBytes) {
      problems.push(`${p}: ${size} bytes: an agent file may be at most ${maxAgentFileBytes} bytes`);
      continue;
    }
    const r = parseAgentFile(await readFile(p, 'utf8'), basename(p));
    if (r.ok) files.push({ path: p, document: r.document });
    else problems.push(`${p}:\n  ${r.errors.join('\n  ')}`);
  }
  const ids = files.map((f) => f.document.id);
  for (const [i, id] of ids.entries())
    if (ids.indexOf(id) !== i)
      problems.push(`${files[i]!.path}: agent '${id}' is also the id of ${files[ids.indexOf(id)]!.path}`);
  if (problems.length) throw new Error(`nothing was applied:\n${problems.join('\n')}`);
  return files;
}

type Place = 'new' | 'running' | 'stopped';

/**
 * Where the agent is: not yet anywhere, running in this deployment, or stopped in it. An agent in
 * the database with no loop in this deployment's Temporal namespace, and no file applied here,
 * is another deployment's (they share the database): refused.
 */
async function placeOf(client: Client, db: Db, id: string, deployment: string): Promise<Place> {
  let status: string | undefined;
  try {
    status = (await client.workflow.getHandle(workflowIds.agent(id)).describe()).status.name;
  } catch (err) {
    if (!(err instanceof WorkflowNotFoundError)) throw err;
  }
  if (status === 'RUNNING') return 'running';
  const [row] = await db.select({ id: agents.id }).from(agents).where(eq(agents.id, id));
  if (!row) return 'new';
  if (status !== undefined) return 'stopped';
  const [last] = await db
    .select({ deployment: agentFiles.deployment })
    .from(agentFiles)
    .where(eq(agentFiles.agentId, id))
    .orderBy(desc(agentFiles.id))
    .limit(1);
  if (last?.deployment === deployment) return 'stopped';
  throw new Error(
    `agent ${id} exists in the database but not in this deployment (${deployment}: no workflow ${workflowIds.agent(id)} in its Temporal namespace): it is another deployment's agent; apply its file there, or choose another id`,
  );
}

function report(path: string, place: Place, r: ApplyAgentFileResult, dryRun: boolean): void {
  out(`${path}:`);
  out(
    r.text
      .split('\n')
      .map((l) => `  ${l}`)
      .join('\n'),
  );
  if (dryRun)
    out(`  (dry run: nothing written${place === 'new' ? '; the agent would be created and its loop started' : ''})`);
  else if (!r.changed) out('  unchanged');
  else if (place === 'new') out(`  created; its loop runs as ${workflowIds.agent(r.agentId)}`);
  else
    out(
      `  applied (agent_files #${r.fileId})${place === 'stopped' ? `; its loop started again as ${workflowIds.agent(r.agentId)}` : ''}`,
    );
}

interface ApplyOptions {
  file: string;
  dryRun?: boolean;
  overwriteDrift?: boolean;
}

async function applyAll(o: ApplyOptions): Promise<void> {
  const files = await readAgentFiles(o.file);
  const env = loadEnvOrExit();
  const appliedBy = `${userInfo().username} (mindloop apply)`;
  await withClient((client) =>
    withDb(async (db) => {
      const deployment = (await resolveDeployment(env, async () => client)).id;
      const batchAgents = files.map((f) => f.document.id);
      // Every agent's place first: one that belongs to another deployment refuses the batch.
      const places = new Map<string, Place>();
      for (const f of files) places.set(f.document.id, await placeOf(client, db, f.document.id, deployment));
      const inputOf = (f: AgentFile, dryRun: boolean): ApplyAgentFileInput => ({
        agentId: f.document.id,
        document: f.document,
        appliedBy,
        dryRun,
        overwriteDrift: o.overwriteDrift === true,
        source: f.path,
        deployment,
        batchAgents,
      });
      // Every file compared first (this only reads): a model or peer that does not exist, or a
      // conflict, in any of them refuses the batch before one is written.
      const refusals: string[] = [];
      const previews = new Map<string, ApplyAgentFileResult>();
      for (const f of files) {
        try {
          const r = await applyAgentFileTo(db, inputOf(f, true));
          previews.set(f.path, r);
          if (r.conflicts.length > 0 && !o.overwriteDrift && !o.dryRun)
            refusals.push(
              `${f.path}: it changes what the agent changed itself since the last apply:\n${r.text}\nPut the agent's values in the file, or pass --overwrite-drift to take the file's.`,
            );
        } catch (err) {
          refusals.push(`${f.path}: ${(err as Error).message}`);
        }
      }
      if (refusals.length) throw new Error(`nothing was applied:\n${refusals.join('\n')}`);
      // New and stopped agents first: a running agent's file may name one of them as a peer, and
      // its loop checks its peers against the database alone.
      const order = [...files].sort(
        (a, b) => Number(places.get(a.document.id) === 'running') - Number(places.get(b.document.id) === 'running'),
      );
      for (const f of order) {
        const place = places.get(f.document.id)!;
        const input = inputOf(f, o.dryRun === true);
        let r: ApplyAgentFileResult;
        if (o.dryRun) r = previews.get(f.path)!;
        else if (place !== 'running') {
          // An agent with no running loop is written here, then started.
          r = await applyAgentFileTo(db, input);
          await startAgentLoop(client, {
            agentId: f.document.id,
            ...(f.document.name ? { name: f.document.name } : {}),
            ...(f.document.pace?.delayMs !== undefined ? { delayMs: f.document.pace.delayMs } : {}),
            ...(f.document.lifeforce ? { lifeforce: f.document.lifeforce } : {}),
          });
        } else {
          // The running loop applies it (the same activity) and puts pace, idle and settings in force.
          const request: ApplyAgentFileRequest = {
            document: f.document,
            appliedBy,
            overwriteDrift: input.overwriteDrift === true,
            source: f.path,
            deployment,
            batchAgents,
          };
          r = await client.workflow
            .getHandle(workflowIds.agent(f.document.id))
            .executeUpdate<ApplyAgentFileResult, [ApplyAgentFileRequest]>('applyAgentFile', { args: [request] })
            .catch((err: unknown) => {
              throw updateRefusal(err);
            });
        }
        report(f.path, place, r, o.dryRun === true);
      }
    }),
  );
}

/** Write the agent's file: to `output` (JSON when it ends in .json), or to stdout as YAML. */
export async function exportAgentFile(agentId: string, output?: string): Promise<void> {
  const doc = await withDb((db) => readLiveDocument(db, agentId));
  if (!doc) throw new Error(`no agent '${agentId}' (nothing was written)`);
  const text = renderAgentFile(
    doc,
    output?.toLowerCase().endsWith('.json') ? 'json' : 'yaml',
    `agent ${agentId}, exported by mindloop agents export at ${new Date().toISOString()}\nmindloop apply -f <this file> applies it back (a no-op until you change it)`,
  );
  if (output) {
    await writeFile(output, text);
    out(`agent ${agentId} written to ${output}`);
  } else process.stdout.write(text);
}

export function registerApplyCommand(program: Command): void {
  program
    .command('apply')
    .description(
      'create or update agents from agent files (YAML or JSON; a folder applies every file in it): prints what changes, keeps what the agent changed itself',
    )
    .requiredOption('-f, --file <path>', 'an agent file, or a folder of them')
    .option('--dry-run', 'print what would change; write nothing')
    .option('--overwrite-drift', "where the file and the agent both changed something, take the file's value")
    .action(async (opts: ApplyOptions) => {
      await applyAll(opts);
    });
}
