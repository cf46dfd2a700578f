/**
 * One registry of payload schemas per message type, in two stages:
 *
 * - stable: (type, generation) → one schema, version `<generation>.0`. A published generation
 *   never changes and is never removed (test/bus/stable-schemas.test.ts holds every one to its
 *   recorded JSON Schema); a breaking change is a new generation.
 * - staging: (type, version) → a schema being tried out, e.g. `1.1-alpha`, `1.2-beta`. Its
 *   generation is the stable one it iterates from (0 before the first). Staging entries may be
 *   redefined at will and travel only on `<root>.staging.*` subjects.
 *
 * `promote` moves a staging version into stable as the next generation (`1.2-beta` → generation
 * 2, `2.0`), as the one step from experiment to contract. Pure; no Node APIs.
 */
import type { z } from 'zod';
import { messageTypePattern, stagingVersionPattern, versionInfo } from './header.js';
import type { BusNamespace, BusStage } from './subjects.js';

export interface SchemaEntry {
  type: string;
  namespace: BusNamespace;
  stage: BusStage;
  generation: number;
  version: string;
  schema: z.ZodType;
}

export class SchemaRegistryError extends Error {
  override readonly name = 'SchemaRegistryError';
}

/** Why a header names no schema this registry knows. */
export type LookupMiss = { reason: 'unknown_type' | 'unknown_version'; detail: string };

export class SchemaRegistry {
  private readonly types = new Map<string, BusNamespace>();
  private readonly stable = new Map<string, SchemaEntry>();
  private readonly staging = new Map<string, SchemaEntry>();

  /** Declare a message type and the namespace it flows in (once). */
  defineType(type: string, namespace: BusNamespace): this {
    if (!messageTypePattern.test(type))
      throw new SchemaRegistryError(`message type ${JSON.stringify(type)} is not a PascalCase name`);
    const known = this.types.get(type);
    if (known && known !== namespace)
      throw new SchemaRegistryError(`${type} already flows in ${known}, not ${namespace}`);
    this.types.set(type, namespace);
    return this;
  }

  /** Publish `schema` as stable generation `generation` of `type`: the next one, never a replacement. */
  publishStable(type: string, generation: number, schema: z.ZodType): SchemaEntry {
    const namespace = this.namespaceOf(type);
    const latest = this.latestStable(type)?.generation ?? 0;
    if (this.stable.has(key(type, generation))) {
      throw new SchemaRegistryError(
        `${type} generation ${generation} is published and immutable; a change is a new generation (${latest + 1}), staged first`,
      );
    }
    if (!Number.isInteger(generation) || generation !== latest + 1) {
      throw new SchemaRegistryError(`${type}: the next stable generation is ${latest + 1}, not ${generation}`);
    }
    const entry: SchemaEntry = { type, namespace, stage: 'stable', generation, version: `${generation}.0`, schema };
    this.stable.set(key(type, generation), entry);
    return entry;
  }

  /** Define (or redefine) staging version `version` of `type`, e.g. `1.1-alpha`. */
  stage(type: string, version: string, schema: z.ZodType): SchemaEntry {
    const namespace = this.namespaceOf(type);
    const m = stagingVersionPattern.exec(version);
    if (!m)
      throw new SchemaRegistryError(
        `${type}: staging version ${JSON.stringify(version)} must look like <generation>.<n>-alpha|beta|rc, e.g. 1.1-alpha`,
      );
    const generation = Number(m[1]);
    const latest = this.latestStable(type)?.generation ?? 0;
    if (generation !== latest) {
      throw new SchemaRegistryError(
        `${type}: staging ${version} must iterate from the latest stable generation (${latest}), i.e. be ${latest}.<n>-…`,
      );
    }
    const entry: SchemaEntry = { type, namespace, stage: 'staging', generation, version, schema };
    this.staging.set(key(type, version), entry);
    return entry;
  }

  /**
   * Move staging `version` of `type` into stable as the next generation; returns the new stable
   * entry. The staging entry is gone afterwards (a message still sent with it is refused, naming
   * the version).
   */
  promote(type: string, version: string): SchemaEntry {
    const staged = this.staging.get(key(type, version));
    if (!staged)
      throw new SchemaRegistryError(
        `${type} has no staging version ${version} (staged: ${this.versionsOf(type, 'staging') || 'none'})`,
      );
    const latest = this.latestStable(type)?.generation ?? 0;
    if (staged.generation !== latest) {
      throw new SchemaRegistryError(
        `${type} ${version} was staged from generation ${staged.generation}, but generation ${latest} is stable now; stage it again from ${latest}`,
      );
    }
    const entry = this.publishStable(type, latest + 1, staged.schema);
    this.staging.delete(key(type, version));
    return entry;
  }

  /** The schema a header names, or why there is none. */
  lookup(type: string, generation: number, version: string): SchemaEntry | LookupMiss {
    if (!this.types.has(type))
      return {
        reason: 'unknown_type',
        detail: `message type ${type} is not known (known: ${[...this.types.keys()].sort().join(', ') || 'none'})`,
      };
    const info = versionInfo(version);
    const entry =
      info?.stage === 'stable' ? this.stable.get(key(type, info.generation)) : this.staging.get(key(type, version));
    if (!entry || entry.generation !== generation) {
      const known = [this.versionsOf(type, 'stable'), this.versionsOf(type, 'staging')].filter(Boolean).join(', ');
      return {
        reason: 'unknown_version',
        detail: `${type} has no schema generation ${generation} version ${version} (known: ${known || 'none'})`,
      };
    }
    return entry;
  }

  latestStable(type: string): SchemaEntry | undefined {
    let best: SchemaEntry | undefined;
    for (const e of this.stable.values()) if (e.type === type && (!best || e.generation > best.generation)) best = e;
    return best;
  }

  stagingEntry(type: string, version: string): SchemaEntry | undefined {
    return this.staging.get(key(type, version));
  }

  /** Every stable entry, by type then generation. */
  stableEntries(): SchemaEntry[] {
    return [...this.stable.values()].sort((a, b) => a.type.localeCompare(b.type) || a.generation - b.generation);
  }

  stagingEntries(): SchemaEntry[] {
    return [...this.staging.values()].sort(
      (a, b) => a.type.localeCompare(b.type) || a.version.localeCompare(b.version),
    );
  }

  namespaceOf(type: string): BusNamespace {
    const ns = this.types.get(type);
    if (!ns) throw new SchemaRegistryError(`message type ${type} is not defined`);
    return ns;
  }

  private versionsOf(type: string, stage: BusStage): string {
    const entries = stage === 'stable' ? this.stableEntries() : this.stagingEntries();
    return entries
      .filter((e) => e.type === type)
      .map((e) => `${e.generation}/${e.version}`)
      .join(', ');
  }
}

function key(type: string, versionOrGeneration: string | number): string {
  return `${type}@${versionOrGeneration}`;
}
