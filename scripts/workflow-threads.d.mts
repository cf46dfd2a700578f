/** The node flags that preload scripts/workflow-threads.mjs: first on a worker process's command line. */
export const workflowThreadFlags: string[];
