/**
 * How to reach a Temporal cluster: mTLS or an API key when the environment names them. Kept
 * apart from the stack (which starts servers) so that a CLI call loads only this.
 */
import { readFileSync } from 'node:fs';
import type { TLSConfig } from '@temporalio/client';
import type { Env } from '../env.js';

/** What both `Connection` (client) and `NativeConnection` (worker) accept. */
export interface TemporalConnectionConfig {
  address: string;
  tls?: TLSConfig | boolean;
  apiKey?: string;
}

/** The HTTP header by which a CLI command names the cluster it means to a notebook, as `<address>/<namespace>`. */
export const temporalHeader = 'x-mindloop-temporal';

/** The Temporal frontend the environment names: TEMPORAL_ADDRESS, or the embedded dev server's port. */
export function temporalAddress(env: Pick<Env, 'TEMPORAL_ADDRESS' | 'TEMPORAL_PORT'>): string {
  return env.TEMPORAL_ADDRESS ?? `127.0.0.1:${env.TEMPORAL_PORT}`;
}

/** Connection options for a Temporal cluster, with mTLS or an API key when configured. */
export function temporalConnectionOptions(env: Env, address: string): TemporalConnectionConfig {
  const opts: TemporalConnectionConfig = { address };
  if (env.TEMPORAL_TLS_CERT && env.TEMPORAL_TLS_KEY) {
    opts.tls = {
      clientCertPair: { crt: readFileSync(env.TEMPORAL_TLS_CERT), key: readFileSync(env.TEMPORAL_TLS_KEY) },
    };
  } else if (env.TEMPORAL_API_KEY) {
    opts.tls = true;
  }
  if (env.TEMPORAL_API_KEY) opts.apiKey = env.TEMPORAL_API_KEY;
  return opts;
}
