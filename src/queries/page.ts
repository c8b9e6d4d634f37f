import type { Sql } from '../store/types.js'

export interface PageRequest {
  readonly limit: number
  readonly offset: number
}

export interface Page<Item> {
  readonly data: Item[]
  readonly pagination: { limit: number; offset: number; total: number; hasMore: boolean }
}

/** Formats a timestamptz exactly as Date#toISOString does (milliseconds, Z). */
export function iso(column: string): string {
  return `to_char(${column} AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.MS"Z"')`
}

/**
 * A page row as an item: without the page query's `total` column and without null values,
 * except for the fields the contract documents as nullable. Copies into a new object rather
 * than deleting keys, which would leave the row in V8's slow dictionary mode for the serializer.
 */
export function compact<Item>(row: Record<string, unknown>, nullable?: ReadonlySet<string>): Item {
  const item: Record<string, unknown> = {}
  for (const key in row) {
    const value = row[key]
    if (key !== 'total' && (value !== null || nullable?.has(key))) item[key] = value
  }
  return item as Item
}

export interface PageQuery {
  /** Page rows with a `total` column; returns no row when the page is empty. */
  readonly pageSql: string
  /** The same filter, counted: runs only when the page is empty. */
  readonly countSql: string
  readonly params: readonly unknown[]
}

/**
 * One round trip in the common case: the page query carries the exact total as
 * a scalar sub-query. Only an empty page (past the end) needs the count alone.
 */
export async function fetchPage<Item>(
  sql: Sql,
  query: PageQuery,
  page: PageRequest,
  /** Turns a page row, `total` column included, into an item without it (see compact). */
  toItem: (row: Record<string, unknown>) => Item,
): Promise<Page<Item>> {
  const params = [...query.params, page.limit, page.offset]
  const rows = await sql.query<Record<string, unknown> & { total: number }>(query.pageSql, params)
  let total: number
  if (rows.length > 0) {
    total = rows[0]?.total ?? 0
  } else {
    const [count] = await sql.query<{ total: number }>(query.countSql, query.params)
    total = count?.total ?? 0
  }
  const data = rows.map((row) => toItem(row))
  return {
    data,
    pagination: { limit: page.limit, offset: page.offset, total, hasMore: page.offset + data.length < total },
  }
}

export interface TenantFilterOptions {
  /**
   * Test-only: leave out the application's own organization filter so that a
   * test can prove row-level security alone keeps tenants apart.
   */
  readonly omitAppTenantFilter?: boolean
}

/** The application's tenant condition on `$1`; row-level security is the second, independent wall. */
export function tenantCondition(alias: string, options: TenantFilterOptions | undefined): string {
  return options?.omitAppTenantFilter ? '$1::text IS NOT NULL' : `${alias}.org_id = $1`
}
