/**
 * `mindloop replay <workflowId|history.json>`: replay a history against the current workflow
 * code and report nondeterminism (a change that would break running workflows).
 */
import { existsSync, readFileSync } from 'node:fs';
import type { Command } from 'commander';
import { historyFromJSON } from '@temporalio/common/lib/proto-utils.js';
import { DeterminismViolationError } from '@temporalio/workflow';
import { Worker, type WorkflowBundleWithSourceMap } from '@temporalio/worker';
import { bundleWorkflows } from '../workers/queues.js';
import { withClient } from './client.js';

export interface ReplayReport {
  source: string;
  events: number;
  ok: boolean;
  error?: string;
  nondeterministic?: boolean;
}

/**
 * Replay one history (a parsed JSON export or a fetched History) against `bundle`. The
 * workflow id matters to workflows that check their own (a campaign must run as
 * `campaign/<id>`): give it, or put it in the export as a top-level `workflowId` (what
 * test/replay/record.ts writes); an export without one replays under the SDK's stand-in id.
 */
export async function replayHistory(source: string, history: unknown, bundle: WorkflowBundleWithSourceMap, workflowId?: string): Promise<ReplayReport> {
  let id = workflowId;
  if (history && typeof history === 'object' && 'workflowId' in history) {
    const { workflowId: recorded, ...rest } = history as { workflowId?: unknown };
    if (typeof recorded === 'string') id ??= recorded;
    history = rest;
  }
  const parsed = historyFromJSON(history);
  const events = parsed.events?.length ?? 0;
  try {
    await Worker.runReplayHistory({ workflowBundle: bundle, replayName: source }, parsed, id);
    return { source, events, ok: true };
  } catch (err) {
    const nondeterministic = err instanceof DeterminismViolationError || /nondetermin/i.test(String(err));
    return { source, events, ok: false, nondeterministic, error: (err as Error).message };
  }
}

export function registerReplayCommand(program: Command): void {
  program
    .command('replay')
    .description('replay a workflow history (a workflow id, or an exported history .json) against the current code')
    .argument('<target>', 'workflow id (e.g. agent/demo) or path to a history JSON file')
    .option('--run-id <id>', 'a specific run of the workflow id')
    .option('--workflow-id <id>', "a history file's workflow id, where the file does not carry one (a campaign checks its own)")
    .action(async (target: string, opts: { runId?: string; workflowId?: string }) => {
      const bundle = await bundleWorkflows();
      let report: ReplayReport;
      if (target.endsWith('.json') || existsSync(target)) {
        if (!existsSync(target)) throw new Error(`no such file: ${target}`);
        let json: unknown;
        try {
          json = JSON.parse(readFileSync(target, 'utf8'));
        } catch (err) {
          throw new Error(`${target} is not JSON: ${(err as Error).message}`);
        }
        report = await replayHistory(target, json, bundle, opts.workflowId);
      } else {
        const history = await withClient((client) => client.workflow.getHandle(target, opts.runId).fetchHistory());
        report = await replayHistory(target, history, bundle, target);
      }
      if (report.ok) process.stdout.write(`replay ok: ${report.source}, ${report.events} events, deterministic\n`);
      else {
        process.stdout.write(`replay FAILED: ${report.source} (${report.events} events)${report.nondeterministic ? ' — NONDETERMINISM' : ''}\n  ${report.error}\n`);
        process.exitCode = 1;
      }
    });
}
