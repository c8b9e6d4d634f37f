/**
 * The SQL text helpers of the request path: formats, the tenant condition, index counts. The
 * settings every request-path transaction opens with, which the page statements count on, are the
 * store's (store/reader-settings.ts).
 */

/** Formats a timestamptz exactly as Date#toISOString does (milliseconds, Z). */
export function iso(column: string): string {
  return `to_char(${column} AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.MS"Z"')`
}

/** The instant a UTC day (an SQL date) begins, as a timestamptz. */
export function utcMidnight(day: string): string {
  return `((${day})::timestamp AT TIME ZONE 'UTC')`
}

/**
 * The application's tenant condition on `$1`; row-level security is the second, independent wall.
 *
 * The organization reaches the planner as the value of a one-row subquery, not as a constant: it
 * estimates every organization as an average one (rows / distinct organizations), never from
 * that organization's own statistics. Those are what misjudge: an organization imported since the
 * last ANALYZE is estimated at one row, and any index that leads with org_id then looks as cheap
 * as the one that serves the request, down to counting a person's appointments by reading all
 * the organization's rows. The subquery runs once per statement.
 */
export function tenantCondition(alias: string): string {
  return `${alias}.org_id = (SELECT $1::text)`
}

/**
 * SQL of the number of rows of `table` (alias `k`) that meet `where`, counted along an index in
 * the list's order: the order asked for leaves the planner no index but those that hold the
 * filter's columns before the order's (a sort costs more than any plan with none: see
 * `readerPreamble` in store/reader-settings.ts). Without it, an index on org_id alone counts as
 * well in its eyes, and it reads every row of the organization to filter them.
 */
export function indexCount(table: string, where: string, orderBy: readonly string[]): string {
  const order = orderBy.map((column) => `k.${column} DESC`).join(', ')
  return `(SELECT count(*) FROM (SELECT FROM ${table} k WHERE ${where} ORDER BY ${order} OFFSET 0) k)`
}
