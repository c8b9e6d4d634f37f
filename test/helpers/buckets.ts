import {
  APPOINTMENT_LIST,
  bucketListOf,
  type FilterDescription,
  filterColumn,
} from '../../src/schemas/filters.js'
import type { Store } from '../../src/store/types.js'

/** Every set of the `many` value filters (the empty one too): the triggers keep a list for each. */
function manySets(): FilterDescription[][] {
  const many = APPOINTMENT_LIST.filters.filter(
    (filter) => filter.compare === 'equals' && filter.rows === 'many',
  )
  const sets: FilterDescription[][] = [[]]
  for (const filter of many) for (const set of [...sets]) sets.push([...set, filter])
  return sets
}

/**
 * The entries of every list, written out from the rows by the filter descriptions (`bucketListOf`),
 * not by the migrations: every active customer; every active appointment in the list of each set
 * of its `many` values.
 */
function entries(): string {
  const appointmentLists = manySets().map((set) => {
    const columns = set.map((filter) => filterColumn(APPOINTMENT_LIST, filter))
    const list = bucketListOf(
      APPOINTMENT_LIST,
      set.map((filter, i) => ({ filter, value: columns[i] ?? '' })),
    )
    const name = [`'${list.name}'`, ...list.parts.flatMap(({ part, value }) => [`'${part}'`, value])].join(
      ' || ',
    )
    const given = columns.map((column) => ` AND ${column} IS NOT NULL`).join('')
    return `SELECT org_id, ${name} AS list, start_at AS at, id FROM appointments WHERE is_active${given}`
  })
  return [
    "SELECT org_id, 'customers' AS list, created_at AS at, id FROM customers WHERE is_active",
    ...appointmentLists,
  ].join('\n         UNION ALL ')
}

/**
 * Buckets of list_buckets (migrations 009 and 012) whose count is not the number of entries in
 * their range, that hold more than 2,000, or lists with entries and no bucket.
 */
export async function bucketFaults(store: Store): Promise<unknown[]> {
  return store.admin((sql) =>
    sql.query(
      `WITH b AS (
         SELECT org_id, list, lo_at, lo_id, n, lead(lo_at) OVER w AS hi_at, lead(lo_id) OVER w AS hi_id
         FROM list_buckets WINDOW w AS (PARTITION BY org_id, list ORDER BY lo_at, lo_id)),
       e AS (
         ${entries()})
       SELECT b.org_id, b.list, b.lo_at, b.lo_id, b.n, c.n AS actual FROM b CROSS JOIN LATERAL (
         SELECT count(*)::int AS n FROM e WHERE e.org_id = b.org_id AND e.list = b.list
           AND (e.at, e.id) >= (b.lo_at, b.lo_id) AND (b.hi_at IS NULL OR (e.at, e.id) < (b.hi_at, b.hi_id))) c
       WHERE b.n <> c.n OR b.n > 2000
       UNION ALL
       SELECT e.org_id, e.list, NULL, NULL, NULL, count(*)::int FROM e
       WHERE NOT EXISTS (SELECT 1 FROM list_buckets x WHERE x.org_id = e.org_id AND x.list = e.list)
       GROUP BY 1, 2`,
    ),
  )
}
