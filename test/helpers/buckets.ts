import { APPOINTMENT_LIST, type FilterDescription, filterColumn } from '../../src/schemas/filters.js'
import type { Store } from '../../src/store/types.js'

/** Every set of the `many` value filters (the empty one too): a list is kept for each. */
function manySets(): FilterDescription[][] {
  return subsets(
    APPOINTMENT_LIST.filters.filter((filter) => filter.compare === 'equals' && filter.rows === 'many'),
  )
}

/**
 * The entries of every list, written out from the rows by the filter descriptions, not by the
 * migrations: every active customer; every active appointment in the list of each set of its
 * `many` values, the list named by those values ({"column": "value", …}).
 */
function entries(): string {
  const appointmentLists = manySets().map((set) => {
    const columns = set.map((filter) => filterColumn(APPOINTMENT_LIST, filter))
    const filters =
      columns.length === 0
        ? `'{}'::jsonb`
        : `jsonb_build_object(${columns.map((column) => `'${column}', ${column}`).join(', ')})`
    const given = columns.map((column) => ` AND ${column} IS NOT NULL`).join('')
    return `SELECT org_id, 'appointments' AS list, (${filters})::text AS filters, start_at AS at, id FROM appointments WHERE is_active${given}`
  })
  return [
    "SELECT org_id, 'customers' AS list, '{}' AS filters, created_at AS at, id FROM customers WHERE is_active",
    ...appointmentLists,
  ].join('\n         UNION ALL ')
}

/**
 * Buckets whose folded count plus the pending changes in their range is not the number of
 * entries in their range, that hold more than 2,000 folded entries, or lists with entries and
 * neither a bucket nor pending changes that account for them. Each entry is placed in its bucket
 * along the buckets' index, so that the check reads each entry once.
 */
export async function bucketFaults(store: Store): Promise<unknown[]> {
  return store.admin((sql) =>
    sql.query(
      `WITH b AS (
         SELECT org_id, list, filters, lo_at, lo_id, n,
                lead(lo_at) OVER w AS hi_at, lead(lo_id) OVER w AS hi_id
         FROM buckets WINDOW w AS (PARTITION BY org_id, list, filters ORDER BY lo_at, lo_id)),
       e AS (
         ${entries()}),
       placed AS (
         SELECT e.org_id, e.list, e.filters, f.lo_at, f.lo_id, count(*)::int AS n
         FROM e LEFT JOIN LATERAL (
           SELECT c.lo_at, c.lo_id FROM buckets c
           WHERE c.org_id = e.org_id AND c.list = e.list AND c.filters = e.filters AND (c.lo_at, c.lo_id) <= (e.at, e.id)
           ORDER BY c.lo_at DESC, c.lo_id DESC LIMIT 1) f ON true
         GROUP BY 1, 2, 3, 4, 5),
       inside AS (
         SELECT b.*, coalesce(p.n, 0) AS actual,
                (SELECT coalesce(sum(c.delta), 0)::int FROM list_changes c
                 WHERE c.org_id = b.org_id AND c.list = b.list AND c.attrs @> b.filters::jsonb
                   AND (c.at, c.id) >= (b.lo_at, b.lo_id)
                   AND (b.hi_at IS NULL OR (c.at, c.id) < (b.hi_at, b.hi_id))) AS pending
         FROM b LEFT JOIN placed p ON p.org_id = b.org_id AND p.list = b.list AND p.filters = b.filters
           AND p.lo_at = b.lo_at AND p.lo_id = b.lo_id)
       SELECT org_id, list, filters, lo_at, lo_id, n, pending, actual FROM inside
       WHERE n + pending <> actual OR n > 2000
       UNION ALL
       SELECT p.org_id, p.list, p.filters, NULL, NULL, NULL,
              (SELECT coalesce(sum(c.delta), 0)::int FROM list_changes c
               WHERE c.org_id = p.org_id AND c.list = p.list AND c.attrs @> p.filters::jsonb), p.n
       FROM placed p
       WHERE p.lo_at IS NULL AND p.n <> (SELECT coalesce(sum(c.delta), 0) FROM list_changes c
                                        WHERE c.org_id = p.org_id AND c.list = p.list AND c.attrs @> p.filters::jsonb)`,
    ),
  )
}

/** Every subset of `items`, the empty one first. */
export function subsets<T>(items: readonly T[]): T[][] {
  const sets: T[][] = [[]]
  for (const item of items) for (const set of [...sets]) sets.push([...set, item])
  return sets
}

/**
 * The lists of the schema's definitions (`list_definitions`) that no index serves: for each list,
 * each combination of its filter columns needs a partial index on `is_active` whose columns are
 * `org_id`, the combination in any order, then the list's order (as `list_index` creates it).
 * Each named as `<list> {<columns>}`.
 */
export async function listsWithoutIndex(store: Store): Promise<string[]> {
  return store.admin(async (sql) => {
    const definitions = await sql.query<{ list: string; at: string; columns: string[] }>(
      'SELECT list, at_column AS at, filter_columns AS columns FROM list_definitions ORDER BY list',
    )
    const indexes = await sql.query<{ list: string; keys: string[] }>(
      `SELECT x.indrelid::regclass::text AS list, array_agg(a.attname::text ORDER BY k.n) AS keys
       FROM pg_index x CROSS JOIN LATERAL unnest(x.indkey::int2[]) WITH ORDINALITY k(attnum, n)
       JOIN pg_attribute a ON a.attrelid = x.indrelid AND a.attnum = k.attnum
       WHERE pg_get_expr(x.indpred, x.indrelid) = 'is_active'
       GROUP BY x.indexrelid, x.indrelid`,
    )
    const serves = (keys: readonly string[], at: string, combination: readonly string[]) =>
      keys.length === combination.length + 3 &&
      keys[0] === 'org_id' &&
      [...keys.slice(1, -2)].sort().join() === [...combination].sort().join() &&
      keys.slice(-2).join() === `${at},id`
    return definitions.flatMap(({ list, at, columns }) =>
      subsets(columns)
        .filter(
          (combination) =>
            !indexes.some((index) => index.list === list && serves(index.keys, at, combination)),
        )
        .map((combination) => `${list} {${combination.join(', ')}}`),
    )
  })
}
