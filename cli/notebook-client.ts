/**
 * Asking the notebook of a running `npm start` instead of Temporal: its Temporal client is
 * connected already, so a command that goes through it loads no gRPC or protobuf code (`status`,
 * `note`: a fraction of the time). Every request names the Temporal cluster and namespace this
 * command would talk to (`x-mindloop-temporal`), and a notebook serving another one refuses it
 * unread (421), so no command ever reaches the wrong cluster's agents.
 */
import { request } from 'node:http';
import type { Env } from '../env.js';
import { temporalAddress, temporalHeader } from '../runtime/temporal-connection.js';

/** How long the notebook may take before the command does the work itself. */
const timeoutMs = 5000;

/** Where this environment's notebook answers, or null when it has none. */
function notebookBase(env: Env): string | null {
  if (env.MINDLOOP_NOTEBOOK_PORT === 'off') return null;
  const h = env.MINDLOOP_NOTEBOOK_HOST;
  const host =
    h === '0.0.0.0' || h === '::' || h === '[::]' ? '127.0.0.1' : h.includes(':') && !h.startsWith('[') ? `[${h}]` : h;
  return `http://${host}:${env.MINDLOOP_NOTEBOOK_PORT}`;
}

/** The notebook's answer: its HTTP status and JSON body. */
interface NotebookAnswer {
  status: number;
  body: Record<string, unknown>;
}

/**
 * Send one request to the notebook. Null when there is none to ask, when it serves another
 * cluster (421), or when it does not answer with JSON: the caller then does the work itself.
 */
export function askNotebook(
  env: Env,
  method: 'GET' | 'POST',
  path: string,
  body?: unknown,
): Promise<NotebookAnswer | null> {
  const base = notebookBase(env);
  if (!base) return Promise.resolve(null);
  const payload = body === undefined ? undefined : JSON.stringify(body);
  const headers: Record<string, string> = {
    accept: 'application/json',
    [temporalHeader]: `${temporalAddress(env)}/${env.TEMPORAL_NAMESPACE}`,
    ...(env.MINDLOOP_NOTEBOOK_TOKEN ? { authorization: `Bearer ${env.MINDLOOP_NOTEBOOK_TOKEN}` } : {}),
    ...(payload !== undefined ? { 'content-type': 'application/json' } : {}),
  };
  return new Promise((resolve) => {
    const req = request(`${base}${path}`, { method, headers, timeout: timeoutMs }, (res) => {
      let text = '';
      res.setEncoding('utf8');
      res.on('data', (d: string) => (text += d));
      res.on('error', () => resolve(null));
      res.on('end', () => {
        if (res.statusCode === 421) return resolve(null);
        try {
          const parsed = JSON.parse(text) as unknown;
          resolve(
            parsed !== null && typeof parsed === 'object'
              ? { status: res.statusCode ?? 0, body: parsed as Record<string, unknown> }
              : null,
          );
        } catch {
          resolve(null);
        }
      });
    });
    req.on('timeout', () => req.destroy(new Error(`no answer within ${timeoutMs} ms`)));
    req.on('error', () => resolve(null));
    req.end(payload);
  });
}
