/**
 * The agent file (`mindloop apply -f`, `mindloop agents export`, the agent loop's file input):
 * its schema, parsing with limits, the three-way comparison and readable diff, and rendering.
 * Pure: workflows import it too.
 */
export * from './schema.js';
export * from './parse.js';
export * from './compare.js';
export * from './render.js';
