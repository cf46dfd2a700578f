/**
 * Column helpers shared by every table group. Column names are spelled out in snake_case
 * (no `casing` option) so that `db/client.ts`, drizzle-kit and raw SQL all agree.
 */
import { sql, type SQL } from 'drizzle-orm';
import { bigint, jsonb, text, timestamp, type AnyPgColumn } from 'drizzle-orm/pg-core';

/** `created_at` / `updated_at`, timestamptz, default now(); `updated_at` is bumped by Drizzle updates. */
export const timestamps = {
  createdAt: timestamp('created_at', { withTimezone: true, mode: 'date' }).notNull().defaultNow(),
  updatedAt: timestamp('updated_at', { withTimezone: true, mode: 'date' })
    .notNull()
    .defaultNow()
    .$onUpdate(() => new Date()),
};

/** `created_at` only, for append-only tables (ledgers, logs, messages). */
export const createdAt = {
  createdAt: timestamp('created_at', { withTimezone: true, mode: 'date' }).notNull().defaultNow(),
};

/** A nullable timestamptz column (archived_at, closed_at, …). */
export const tstz = (name: string) => timestamp(name, { withTimezone: true, mode: 'date' });

/**
 * Surrogate row id: bigint identity. BY DEFAULT (not ALWAYS) so that fork/clone copies and
 * learning imports can carry ids across schemas without `OVERRIDING SYSTEM VALUE`.
 */
export const rowId = () => bigint('id', { mode: 'number' }).primaryKey().generatedByDefaultAsIdentity();

/** A bigint id referencing another table's `rowId`, read as a JS number. */
export const bigintRef = (name: string) => bigint(name, { mode: 'number' });

/** `<name> text[] not null default '{}'`. */
export const textArray = (name: string) =>
  text(name)
    .array()
    .notNull()
    .default(sql`'{}'::text[]`);

/** `tags text[] not null default '{}'`. */
export const tags = () => textArray('tags');

/** A non-null jsonb column with a JSON default, typed as T. */
export const jsonbOf = <T>(name: string, fallback: T) => jsonb(name).$type<T>().notNull().default(fallback);

/**
 * The SQL of a CHECK that pins a text column to a closed set of values. Text + CHECK rather
 * than pg enums: adding a value later is a plain migration (no ALTER TYPE outside a
 * transaction), and a fork's copied schema carries no type dependencies.
 */
export function oneOf(column: AnyPgColumn, values: readonly string[]): SQL {
  // Values are compile-time constants of this module; quoting them literally keeps the
  // generated DDL free of bind parameters (drizzle-kit cannot render those in a CHECK).
  const list = values.map((v) => `'${v.replaceAll("'", "''")}'`).join(', ');
  return sql`${sql.identifier(column.name)} in (${sql.raw(list)})`;
}
