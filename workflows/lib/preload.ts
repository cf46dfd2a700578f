/**
 * What the worker evaluates once for all its workflows (workers/queues.ts, preloadModules): zod and core/shared.ts.
 * The reusable V8 context gives each workflow its own module cache, so every open workflow would
 * otherwise evaluate its own copy of zod (its ~180 classes). The SDK's own preload line,
 * `require('zod')`, is dropped by webpack because zod declares `sideEffects: false`; importing it
 * here, in a module that uses it, keeps it. zod holds no per-workflow state (we register no
 * metadata); the SDK freezes what is preloaded.
 *
 * Only zod and core/shared.ts: the schemas core/ and workflows/ build cannot be preloaded as
 * modules. zod binds a schema's methods (`.optional`, `.parse`…) on first use by defining them
 * on the schema itself, which a frozen schema refuses ("Cannot define property optional,
 * object is not extensible"), failing the workflow task. The agent loop's schemas are built
 * instead through core/shared.ts's `sharedValue`, whose map this module makes one per worker
 * and which the freeze does not reach; the agent loop keeps its imports small besides
 * (test/workflows/module-graph.test.ts).
 */
import { z } from 'zod';
import { sharedValue } from '../../core/shared.js';

// zod keeps its defaults (English messages, the parse memoizer) in a global config that it
// fills when the first schemas are built; build them here, before the SDK freezes that config.
z.object({ preload: z.array(z.string()) }).safeParse({ preload: [1] });

export const sharedZod = z;

/** core/shared.ts's map, one for all workflows (evaluated here, before any of them). */
export const sharedValues = sharedValue;
