/**
 * `mindloop replay <workflowId|history.json>`: replay a history against the current workflow
 * code and report nondeterminism (a change that would break running workflows).
 */
import { existsSync, readFileSync } from 'node:fs';
import type { Command } from 'commander';
import type { Client } from '@temporalio/client';
import type { History } from '@temporalio/common/lib/proto-utils.js';
import { historyFromJSON } from '@temporalio/common/lib/proto-utils.js';
import { DeterminismViolationError } from '@temporalio/workflow';
import { DefaultLogger, Runtime, Worker, type WorkflowBundleWithSourceMap } from '@temporalio/worker';
import { parseEnv } from '../env.js';
import { bundleWorkflows } from '../workers/queues.js';
import { withClient } from './client.js';

interface ReplayReport {
  source: string;
  events: number;
  ok: boolean;
  error?: string;
  nondeterministic?: boolean;
}

/**
 * Replay one exported history (parsed JSON, as `temporal workflow show --output json` or the UI
 * writes it) against `bundle`. The workflow id matters to workflows that check their own (a
 * campaign must run as `campaign/<id>`): give it, or put it in the export as a top-level
 * `workflowId` (what test/replay/record.ts writes); an export without one replays under the
 * SDK's stand-in id.
 */
export async function replayHistory(
  source: string,
  history: unknown,
  bundle: WorkflowBundleWithSourceMap,
  workflowId?: string,
): Promise<ReplayReport> {
  let id = workflowId;
  if (history && typeof history === 'object' && 'workflowId' in history) {
    const { workflowId: recorded, ...rest } = history as { workflowId?: unknown };
    if (typeof recorded === 'string') id ??= recorded;
    history = rest;
  }
  return replayParsed(source, historyFromJSON(history), bundle, id);
}

/**
 * Fetch a workflow's history from the server. A missing execution is an error naming the id and
 * namespace: the raw gRPC NOT_FOUND says neither.
 */
async function fetchWorkflowHistory(client: Client, workflowId: string, runId?: string): Promise<History> {
  try {
    return await client.workflow.getHandle(workflowId, runId).fetchHistory();
  } catch (err) {
    // 5 is gRPC NOT_FOUND; fetchHistory passes the service error through unwrapped.
    if ((err as { code?: unknown }).code === 5 || (err as Error).name === 'WorkflowNotFoundError') {
      throw new Error(
        `no workflow ${workflowId}${runId ? ` (run ${runId})` : ''} in namespace ${client.options.namespace}: check the id (\`temporal workflow list\`)`,
      );
    }
    throw err;
  }
}

/**
 * Replay a history fetched from the server (already protobuf objects: it must not go through
 * the JSON parser, whose enum fix-up expects strings) against `bundle`, under its own id.
 */
function replayFetchedHistory(
  workflowId: string,
  history: History,
  bundle: WorkflowBundleWithSourceMap,
): Promise<ReplayReport> {
  return replayParsed(workflowId, history, bundle, workflowId);
}

async function replayParsed(
  source: string,
  history: History,
  bundle: WorkflowBundleWithSourceMap,
  workflowId: string | undefined,
): Promise<ReplayReport> {
  const events = history.events?.length ?? 0;
  try {
    await Worker.runReplayHistory({ workflowBundle: bundle, replayName: source }, history, workflowId);
    return { source, events, ok: true };
  } catch (err) {
    const nondeterministic = err instanceof DeterminismViolationError || /nondetermin/i.test(String(err));
    return { source, events, ok: false, nondeterministic, error: (err as Error).message };
  }
}

/**
 * The SDK's log for this process: its warnings and errors only, unless `--verbose` (or
 * MINDLOOP_VERBOSE) asks for it at LOG_LEVEL. A replay runs a Worker, which otherwise prints every
 * state change it goes through around the one line that is the command's answer.
 */
function installSdkLog(verbose: boolean): void {
  const env = parseEnv();
  const loud = verbose || (env.success && env.data.MINDLOOP_VERBOSE);
  Runtime.install({ logger: new DefaultLogger(loud ? (env.success ? env.data.LOG_LEVEL : 'INFO') : 'WARN') });
}

/** `mindloop replay <workflowId|history.json> [--run-id] [--workflow-id]`. */
export function registerReplayCommand(program: Command): void {
  program
    .command('replay')
    .description('replay a workflow history (a workflow id, or an exported history .json) against the current code')
    .argument('<target>', 'workflow id (e.g. agent/demo) or path to a history JSON file')
    .option('--run-id <id>', 'a specific run of the workflow id')
    .option(
      '--workflow-id <id>',
      "a history file's workflow id, where the file does not carry one (a campaign checks its own)",
    )
    .action(async (target: string, opts: { runId?: string; workflowId?: string }, command: Command) => {
      installSdkLog(command.optsWithGlobals<{ verbose?: boolean }>().verbose === true);
      let report: ReplayReport;
      if (target.endsWith('.json') || existsSync(target)) {
        if (!existsSync(target)) throw new Error(`no such file: ${target}`);
        let json: unknown;
        try {
          json = JSON.parse(readFileSync(target, 'utf8'));
        } catch (err) {
          throw new Error(`${target} is not JSON: ${(err as Error).message}`);
        }
        report = await replayHistory(target, json, await bundleWorkflows(), opts.workflowId);
      } else {
        // Fetch before bundling, so a wrong id fails at once rather than after webpack.
        const history = await withClient((client) => fetchWorkflowHistory(client, target, opts.runId));
        report = await replayFetchedHistory(target, history, await bundleWorkflows());
      }
      if (report.ok) process.stdout.write(`replay ok: ${report.source}, ${report.events} events, deterministic\n`);
      else {
        process.stdout.write(
          `replay FAILED: ${report.source} (${report.events} events)${report.nondeterministic ? ' — NONDETERMINISM' : ''}\n  ${report.error}\n`,
        );
        process.exitCode = 1;
      }
    });
}
