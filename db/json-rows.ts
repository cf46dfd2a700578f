/**
 * Several reads in one statement: each read's rows come back as one json column (an array, in
 * the read's order), and `rowsOf` turns them into the rows Drizzle returns for the read itself.
 * One round trip, one parse and plan, one result to decode, where separate statements cost each
 * of those once per read (on the embedded PGlite, which runs one statement at a time, a few
 * hundred microseconds each).
 */
import { Column, getTableColumns, is, sql, type SQL, type SQLWrapper } from 'drizzle-orm';
import type { PgTable } from 'drizzle-orm/pg-core';

/** The rows of `query` as a json array, each row an object keyed by its column names. */
export function jsonRows(query: SQLWrapper): SQL<unknown> {
  return sql`(select coalesce(json_agg(r), '[]'::json) from (${query}) r)`;
}

/** A select's field as its json row names it, and how its value is decoded (a column: as Drizzle maps it). */
type FieldKey = [prop: string, key: string, column: Column | undefined];

/** One raw row (column names, driver or json values) by `fields`. */
function decodeRow(fields: readonly FieldKey[], raw: Record<string, unknown>): Record<string, unknown> {
  return Object.fromEntries(
    fields.map(([prop, key, column]) => {
      const v = raw[key];
      return [prop, v == null ? null : column ? column.mapFromDriverValue(v) : v];
    }),
  );
}

const columnsOf = new WeakMap<PgTable, FieldKey[]>();

/** One row of `table` read raw (column names, driver or json values), as Drizzle maps it. */
export function rowOf<T extends PgTable>(table: T, raw: Record<string, unknown>): T['$inferSelect'] {
  let fields = columnsOf.get(table);
  if (!fields)
    columnsOf.set(table, (fields = Object.entries(getTableColumns(table)).map(([prop, c]) => [prop, c.name, c])));
  return decodeRow(fields, raw) as T['$inferSelect'];
}

/** What `jsonRows` of a whole-row select of `table` returned, as Drizzle's rows of that select. */
export function rowsOf<T extends PgTable>(table: T, json: unknown): Array<T['$inferSelect']> {
  return (json as Array<Record<string, unknown>>).map((raw) => rowOf(table, raw));
}

/**
 * What `jsonRows` of a select of `fields` returned (`db.select(fields)`: columns, each under its
 * column's name and decoded as Drizzle does, and aliased expressions, under their alias as json
 * gave them), as that select's rows: `T`, the rows Drizzle would return for it.
 */
export function fieldRowsOf<T>(fields: Record<string, Column | SQL.Aliased>, json: unknown): T[] {
  const keys: FieldKey[] = Object.entries(fields).map(([prop, f]) =>
    is(f, Column) ? [prop, f.name, f] : [prop, f.fieldAlias, undefined],
  );
  return (json as Array<Record<string, unknown>>).map((raw) => decodeRow(keys, raw) as T);
}
