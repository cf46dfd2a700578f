/** The nerves the runtime knows, by name (the `nerve` of workflow input and of every row). */
import { collisionNerve } from './collision.js';
import type { NerveDef } from './nerve.js';

export const nerveNames = ['collision'] as const;
type NerveName = (typeof nerveNames)[number];

export const nerves: Record<NerveName, NerveDef> = { collision: collisionNerve };
