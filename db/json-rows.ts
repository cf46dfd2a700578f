/**
 * Several reads in one statement: each read's rows come back as one json column (an array, in
 * the read's order), and `rowsOf` turns them into the rows Drizzle returns for the read itself.
 * One round trip, one parse and plan, one result to decode, where separate statements cost each
 * of those once per read (on the embedded PGlite, which runs one statement at a time, a few
 * hundred microseconds each).
 */
import { getTableColumns, sql, type Column, type SQL, type SQLWrapper } from 'drizzle-orm';
import type { PgTable } from 'drizzle-orm/pg-core';

/** The rows of `query` as a json array, each row an object keyed by its column names. */
export function jsonRows(query: SQLWrapper): SQL<unknown> {
  return sql`(select coalesce(json_agg(r), '[]'::json) from (${query}) r)`;
}

const columnsOf = new WeakMap<PgTable, Array<[string, Column]>>();

/** One row of `table` read raw (column names, driver or json values), as Drizzle maps it. */
export function rowOf<T extends PgTable>(table: T, raw: Record<string, unknown>): T['$inferSelect'] {
  let columns = columnsOf.get(table);
  if (!columns) columnsOf.set(table, (columns = Object.entries(getTableColumns(table))));
  return Object.fromEntries(
    columns.map(([prop, column]) => [
      prop,
      raw[column.name] == null ? null : column.mapFromDriverValue(raw[column.name]),
    ]),
  ) as T['$inferSelect'];
}

/** What `jsonRows` of a whole-row select of `table` returned, as Drizzle's rows of that select. */
export function rowsOf<T extends PgTable>(table: T, json: unknown): Array<T['$inferSelect']> {
  return (json as Array<Record<string, unknown>>).map((raw) => rowOf(table, raw));
}
