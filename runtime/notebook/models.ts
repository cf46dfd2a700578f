/**
 * The notebook's Models page behind the API: the catalogue listed with its usage, a model added
 * (tested first, as `mindloop models add`), tested again, removed — through runtime/models.ts,
 * the code the CLI uses. A refusal is an answer naming the field at fault: bad input and a model
 * the server lacks are 400, an entry that is not there 404, a name taken or a model still
 * assigned 409, a server that does not answer 502.
 */
import type { Context, Hono } from 'hono';
import { z } from 'zod';
import type { EnvSource } from '../../activities/llm/providers/keys.js';
import type { Db } from '../../db/client.js';
import {
  addModel,
  listModels,
  ModelCatalogueError,
  modelInput,
  modelNameSchema,
  removeModel,
  testModel,
  type CatalogueProblem,
} from '../models.js';
import { NotebookError, parseOr400 } from './actions.js';

export interface NotebookModelDeps {
  db: Db;
  /** Where a model's key is read by its variable's name, and the local model's folder; without it no key is found. */
  models?: { env: EnvSource; toolsDir?: string };
}

const statusOf: Record<CatalogueProblem, NotebookError['status']> = {
  invalid: 400,
  key: 400,
  'no-such-model': 400,
  'not-found': 404,
  exists: 409,
  'in-use': 409,
  unreachable: 502,
  failed: 502,
};

/** A catalogue refusal as the page's answer; the field at fault is named for the add form only (a row's test or remove has no fields). */
function answer(form: boolean) {
  return (err: unknown): never => {
    if (err instanceof ModelCatalogueError)
      throw new NotebookError(
        statusOf[err.problem],
        err.message,
        form && err.field ? [{ field: err.field, message: err.message }] : [],
      );
    throw err;
  };
}

/** `test: false` in the body adds without calling the model. */
const addBody = z.object({ test: z.boolean().default(true) });

/** The routes under /api/models; `body` reads a request's JSON (the server's own reader). */
export function modelRoutes(app: Hono, d: NotebookModelDeps, body: (c: Context) => Promise<unknown>): void {
  const deps = () => ({
    db: d.db,
    env: d.models?.env ?? {},
    ...(d.models?.toolsDir ? { toolsDir: d.models.toolsDir } : {}),
  });
  const name = (raw: string) => parseOr400(modelNameSchema, raw, 'name');
  app.get('/api/models', async (c) => c.json({ models: await listModels(d.db) }));
  app.post('/api/models', async (c) => {
    const raw = await body(c);
    const { test, ...rest } =
      raw !== null && typeof raw === 'object' && !Array.isArray(raw) ? (raw as Record<string, unknown>) : {};
    const opts = parseOr400(addBody, { test });
    // Every field at fault at once, before anything is called.
    const input = parseOr400(modelInput, rest);
    return c.json({ model: await addModel(deps(), input, opts).catch(answer(true)) }, 201);
  });
  app.post('/api/models/:name/test', async (c) =>
    c.json({ model: await testModel(deps(), name(c.req.param('name'))).catch(answer(false)) }),
  );
  app.delete('/api/models/:name', async (c) => {
    const n = name(c.req.param('name'));
    await removeModel(d.db, n).catch(answer(false));
    return c.json({ removed: n });
  });
}
