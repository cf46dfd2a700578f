/**
 * Continue as new with the failover's workflow task timeout: a continue-as-new keeps what its
 * run had, so a run started before that timeout was set (with the server's 10 s) takes it here.
 */
import { makeContinueAsNewFunc, type Workflow } from '@temporalio/workflow';
import { workflowFailover } from './activity-options.js';

export function continueAsNewWithFailover<F extends Workflow>(...args: Parameters<F>): Promise<never> {
  return makeContinueAsNewFunc<F>(workflowFailover)(...args);
}
