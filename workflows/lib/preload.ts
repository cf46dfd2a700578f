/**
 * What the worker evaluates once for all its workflows (workers/queues.ts, preloadModules): zod.
 * The reusable V8 context gives each workflow its own module cache, so every open workflow would
 * otherwise evaluate its own copy of zod (its ~180 classes). The SDK's own preload line,
 * `require('zod')`, is dropped by webpack because zod declares `sideEffects: false`; importing it
 * here, in a module that uses it, keeps it. zod holds no per-workflow state (we register no
 * metadata); the SDK freezes what is preloaded.
 *
 * Only zod: the schemas core/ builds cannot be shared this way. zod binds a schema's methods
 * (`.optional`, `.parse`…) on first use by defining them on the schema itself, which a frozen
 * schema refuses ("Cannot define property optional, object is not extensible"), failing the
 * workflow task. So core/ stays per workflow, and the agent loop keeps its imports small instead
 * (test/workflows/module-graph.test.ts).
 */
import { z } from 'zod';

// zod keeps its defaults (English messages, the parse memoizer) in a global config that it
// fills when the first schemas are built; build them here, before the SDK freezes that config.
z.object({ preload: z.array(z.string()) }).safeParse({ preload: [1] });

export const sharedZod = z;
