/** Temporal test environments wired to the pinned binaries in `.tools/`. */
import { fileURLToPath } from 'node:url';
import { TestWorkflowEnvironment } from '@temporalio/testing';
import { bundleWorkflowCode, type WorkflowBundleWithSourceMap } from '@temporalio/worker';
import { allSearchAttributes } from '../../workflows/lib/search-attributes.js';
import { toolPath } from './env.js';

// temporal.api.enums.v1.IndexedValueType numbers.
const indexedValueType: Record<string, number> = { TEXT: 1, KEYWORD: 2, INT: 3, DOUBLE: 4, BOOL: 5, DATETIME: 6, KEYWORD_LIST: 7 };

/** The time-skipping test server, with the app's search attributes registered. */
export async function createTimeSkippingEnv(): Promise<TestWorkflowEnvironment> {
  const env = await TestWorkflowEnvironment.createTimeSkipping({
    server: { executable: { type: 'existing-path', path: toolPath('temporal-test-server') } },
  });
  await env.connection.operatorService.addSearchAttributes({
    namespace: env.namespace ?? 'default',
    searchAttributes: Object.fromEntries(allSearchAttributes.map((k) => [k.name, indexedValueType[k.type] ?? 0])),
  });
  return env;
}

const silent = { trace() {}, debug() {}, info() {}, warn() {}, error: console.error, log() {} };

/** Bundle a workflows module once per test file (webpack takes a few seconds). */
export function bundle(relativeToTestHelpers: string): Promise<WorkflowBundleWithSourceMap> {
  return bundleWorkflowCode({ workflowsPath: fileURLToPath(new URL(relativeToTestHelpers, import.meta.url)), logger: silent });
}

export const fixtureWorkflowsPath = '../fixtures/workflows/index.ts';
export const productWorkflowsPath = '../../workflows/index.ts';
