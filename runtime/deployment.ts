/**
 * Which deployment this process belongs to. A deployment is one Temporal namespace's Mindloop:
 * its workers, CLI, notebook and MCP bridge. Its bus traffic lives under `<bus root>.<id>`, so
 * two deployments on one NATS (two clones on a machine, staging beside production) never take
 * each other's commands or show each other's beats. Every process of a deployment finds the same
 * id without configuration: MINDLOOP_DEPLOYMENT when set, else derived from the namespace's id in
 * Temporal (core/bus/subjects.ts `deploymentIdOf`).
 */
import type { Client } from '@temporalio/client';
import { deploymentIdOf } from '../core/bus/subjects.js';
import type { Env } from '../env.js';

export interface Deployment {
  id: string;
  /** Where the id came from: the environment, or the Temporal namespace. */
  from: 'MINDLOOP_DEPLOYMENT' | 'temporal';
  /** The deployments whose commands this one takes (MINDLOOP_BUS_PEERS; empty: none). */
  peers: readonly string[];
}

/** This deployment: MINDLOOP_DEPLOYMENT, or the id of the Temporal namespace `client` serves. */
export async function resolveDeployment(
  env: Pick<Env, 'MINDLOOP_DEPLOYMENT' | 'MINDLOOP_BUS_PEERS'>,
  client: () => Promise<Pick<Client, 'workflowService' | 'options'>>,
): Promise<Deployment> {
  const peers = env.MINDLOOP_BUS_PEERS;
  if (env.MINDLOOP_DEPLOYMENT) return { id: env.MINDLOOP_DEPLOYMENT, from: 'MINDLOOP_DEPLOYMENT', peers };
  let c: Pick<Client, 'workflowService' | 'options'>;
  try {
    c = await client();
  } catch (err) {
    throw new Error(
      `cannot tell which deployment this is: ${(err as Error).message} (or set MINDLOOP_DEPLOYMENT to the id \`mindloop bus info\` prints)`,
    );
  }
  const namespace = c.options.namespace;
  const r = await c.workflowService.describeNamespace({ namespace });
  const namespaceId = r.namespaceInfo?.id;
  if (!namespaceId) throw new Error(`Temporal did not tell the id of namespace ${namespace}; set MINDLOOP_DEPLOYMENT`);
  return { id: deploymentIdOf(namespace, namespaceId), from: 'temporal', peers };
}
