/**
 * An agent's file behind the API: `GET /api/agents/<id>/file` answers the agent as it is now, as
 * the YAML `mindloop agents export` writes (`?format=json`: the same document as JSON), read-only.
 * It changes nothing: a person edits the file and applies it with `mindloop apply -f`. An unknown
 * agent is a 404 naming it; a bad id or format a 400 naming the field.
 */
import type { Hono } from 'hono';
import { z } from 'zod';
import { readLiveDocument } from '../../activities/agent-file.js';
import { renderAgentFile } from '../../core/agent-file/index.js';
import type { Db } from '../../db/client.js';
import { NotebookError, ids, parseOr400 } from './actions.js';

const fileQuery = z.object({ format: z.enum(['yaml', 'json']).default('yaml') });

const contentTypes = { yaml: 'application/yaml; charset=utf-8', json: 'application/json; charset=utf-8' } as const;

/** The route under /api/agents/<id>/file. */
export function agentFileRoutes(app: Hono, d: { db: Db }): void {
  app.get('/api/agents/:id/file', async (c) => {
    const id = ids.agent(c.req.param('id'));
    const { format } = parseOr400(fileQuery, c.req.query());
    const doc = await readLiveDocument(d.db, id);
    if (!doc) throw new NotebookError(404, `no agent ${id}: apply its file first (mindloop apply -f ${id}.yaml)`);
    // The id is a slug (letters, digits, ".", "-", "_"), so it needs no quoting in the header.
    return c.body(renderAgentFile(doc, format), 200, {
      'content-type': contentTypes[format],
      'content-disposition': `inline; filename="${id}.${format}"`,
    });
  });
}
