/**
 * A published stable generation never changes: every stable schema of the catalogue
 * (core/bus/catalogue.ts) is held to the JSON Schema recorded for it in
 * core/bus/stable-schemas.json when it was published. A changed or removed generation fails
 * here, naming it; a new generation is recorded once with
 * `UPDATE_BUS_SCHEMAS=1 npx vitest run test/bus/stable-schemas.test.ts` (which never rewrites
 * an existing record). The last test shows the check catches a deliberate change.
 */
import { readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { z } from 'zod';
import { catalogueRegistry, messageCatalogue } from '../../core/bus/catalogue.js';
import { SchemaRegistry } from '../../core/bus/registry.js';

const lockPath = join(import.meta.dirname, '..', '..', 'core', 'bus', 'stable-schemas.json');
type Lock = Record<string, unknown>;

function recorded(registry: SchemaRegistry): Lock {
  return Object.fromEntries(
    registry.stableEntries().map((e) => [`${e.type}@${e.generation}`, z.toJSONSchema(e.schema)]),
  );
}

/** What differs between the registry's stable generations and the record: changed, removed, new. */
function drift(registry: SchemaRegistry, lock: Lock): { changed: string[]; removed: string[]; added: string[] } {
  const now = recorded(registry);
  return {
    changed: Object.keys(lock).filter((k) => k in now && JSON.stringify(now[k]) !== JSON.stringify(lock[k])),
    removed: Object.keys(lock).filter((k) => !(k in now)),
    added: Object.keys(now).filter((k) => !(k in lock)),
  };
}

function readLock(): Lock {
  return JSON.parse(readFileSync(lockPath, 'utf8')) as Lock;
}

describe('stable schema generations are immutable', () => {
  it('every published generation matches its record, none is gone, none is unrecorded', () => {
    const registry = catalogueRegistry();
    let lock = readLock();
    let d = drift(registry, lock);
    if (d.added.length > 0 && process.env.UPDATE_BUS_SCHEMAS === '1') {
      // Append only: an existing record is never rewritten, whatever the flag.
      const now = recorded(registry);
      lock = { ...lock, ...Object.fromEntries(d.added.map((k) => [k, now[k]])) };
      writeFileSync(lockPath, `${JSON.stringify(lock, null, 2)}\n`);
      d = drift(registry, lock);
    }
    expect(
      d.changed,
      `published stable generations changed: ${d.changed.join(', ')}. A published generation is a contract: restore it, and stage the change as the next generation`,
    ).toEqual([]);
    expect(
      d.removed,
      `published stable generations removed: ${d.removed.join(', ')}; they stay for as long as anything may send them`,
    ).toEqual([]);
    expect(
      d.added,
      `stable generations not recorded yet: ${d.added.join(', ')}; record them with UPDATE_BUS_SCHEMAS=1 npx vitest run test/bus/stable-schemas.test.ts`,
    ).toEqual([]);
    expect(Object.keys(lock).length).toBeGreaterThanOrEqual(Object.keys(messageCatalogue).length);
  });

  it('catches a deliberate change to a published generation (and a removed one)', () => {
    const lock = readLock();
    const tampered = new SchemaRegistry();
    for (const [type, def] of Object.entries(messageCatalogue)) {
      tampered.defineType(type, def.namespace);
      if (type === 'AgentVerdict') continue; // "removed"
      // HeartbeatSignal generation 1 gains a field: an "additive" edit is still a change.
      const schema =
        type === 'HeartbeatSignal'
          ? (def.stable[0] as z.ZodObject).extend({ mood: z.string().optional() })
          : def.stable[0];
      tampered.publishStable(type, 1, schema);
    }
    expect(drift(tampered, lock)).toEqual({ changed: ['HeartbeatSignal@1'], removed: ['AgentVerdict@1'], added: [] });
  });
});
