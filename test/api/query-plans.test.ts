import pg from 'pg'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { patience } from '../../packages/client/test/helpers/patience.js'
import { APPOINTMENT, columnOf } from '../../src/schemas/descriptions.js'
import { APPOINTMENT_LIST, type FilterDescription, filterColumn } from '../../src/schemas/filters.js'
import { seedSynthetic } from '../../src/seed/run.js'
import { createTestStore, postgresAvailable, type TestStore } from '../helpers/stores.js'

/** The plan of a statement as the request path runs it: under openbook_reader, with the tenant set. */
async function planOf(testStore: TestStore, orgId: string, text: string, params: unknown[]): Promise<string> {
  return testStore.store.read(async (sql) => {
    await sql.query("SELECT set_config('openbook.org_id', $1, true)", [orgId])
    const rows = await sql.query<{ 'QUERY PLAN': string }>(`EXPLAIN ${text}`, params)
    return rows.map((row) => row['QUERY PLAN']).join('\n')
  })
}

describe.skipIf(!postgresAvailable())('query plans on PostgreSQL', () => {
  let testStore: TestStore
  let orgId: string

  beforeAll(async () => {
    testStore = await createTestStore('postgres')
    const { orgIds } = await seedSynthetic(testStore.store, {
      orgs: 14,
      customers: 20_000,
      appointments: 40_000,
      seed: 5,
    })
    // The last organization is one of the small ones: an index must not read its neighbours' rows.
    orgId = orgIds.at(-1) ?? ''
    const client = new pg.Client({ connectionString: testStore.url })
    await client.connect()
    await client.query('VACUUM ANALYZE')
    await client.end()
  }, patience(120_000))

  afterAll(async () => {
    await testStore?.close()
  })

  const page = (table: string, order: string, where: string) =>
    `SELECT k.id FROM ${table} k WHERE k.org_id = $1 AND k.is_active ${where} ORDER BY ${order} LIMIT 50 OFFSET 100`
  const count = (table: string, where: string) =>
    `SELECT count(*) FROM ${table} k WHERE k.org_id = $1 AND k.is_active ${where}`

  it.each([
    ['customers', 'k.created_at DESC, k.id DESC'],
    ['appointments', 'k.start_at DESC, k.id DESC'],
  ])(
    '%s without filters: the page reads the list index in order, no sort, no sequential scan',
    async (table, order) => {
      const plan = await planOf(testStore, orgId, page(table, order, ''), [orgId])
      expect(plan, plan).toContain(`${table}_active_list_idx`)
      expect(plan, plan).not.toMatch(/Seq Scan|Sort/)
    },
  )

  it.each([
    ['customers', 'customers_active_count_idx'],
    ['appointments', 'appointments_active_count_idx'],
  ])('%s: the unfiltered total is an index-only count of the narrow count index', async (table, index) => {
    const plan = await planOf(testStore, orgId, count(table, ''), [orgId])
    expect(plan, plan).toMatch(new RegExp(`Index Only Scan using ${index}`))
    expect(plan, plan).not.toMatch(/Seq Scan|Sort/)
  })

  /**
   * Each filter of the list's description (filters.ts) as the SQL reads it: a value filter's
   * column equal to a value the organization has; the bounds of the order field as a range.
   */
  const bounds = APPOINTMENT_LIST.filters.filter((filter) => filter.compare !== 'equals')
  const orderColumn = columnOf(APPOINTMENT, APPOINTMENT_LIST.orderField)
  const SHAPES: { name: string; column: string; filter?: FilterDescription }[] = [
    ...APPOINTMENT_LIST.filters
      .filter((filter) => filter.compare === 'equals')
      .map((filter) => ({ name: filter.param, column: filterColumn(APPOINTMENT_LIST, filter), filter })),
    ...(bounds.length > 0
      ? [{ name: bounds.map((filter) => filter.param).join('+'), column: orderColumn }]
      : []),
  ]

  /** The indexes of appointments whose keys lead with (org_id, column): those that serve its filter. */
  async function indexesLeadingWith(column: string): Promise<string[]> {
    const rows = await testStore.store.admin((sql) =>
      sql.query<{ name: string }>(
        `SELECT c.relname AS name FROM pg_index i JOIN pg_class c ON c.oid = i.indexrelid
         WHERE i.indrelid = 'appointments'::regclass
           AND pg_get_indexdef(i.indexrelid, 1, false) = 'org_id' AND pg_get_indexdef(i.indexrelid, 2, false) = $1`,
        [column],
      ),
    )
    return rows.map((row) => row.name)
  }

  it.each(SHAPES)(
    'appointments with $name: an index in list order, no sort, no sequential scan',
    async ({ column, filter }) => {
      let where: string
      let values: unknown[]
      if (filter) {
        const [row] = await testStore.store.admin((sql) =>
          sql.query<{ value: string }>(
            `SELECT ${column}::text AS value FROM appointments WHERE org_id = $1 AND is_active AND ${column} IS NOT NULL
             GROUP BY 1 ORDER BY count(*) DESC, 1 LIMIT 1`,
            [orgId],
          ),
        )
        expect(row, `the data has no ${column} in ${orgId}: the plan would be of nothing`).toBeDefined()
        where = `AND k.${column} = $2`
        values = [row?.value]
      } else {
        where = `AND k.${column} >= $2 AND k.${column} <= $3`
        values = ['2024-01-01T00:00:00Z', '2024-06-30T00:00:00Z']
      }
      // A few filter reads along the index it names; a many filter (and the range) along any that
      // leads with its column (list_index's, or 012's that adds the status).
      const served = filter?.rows === 'few' ? [filter.index] : await indexesLeadingWith(column)
      expect(
        served.length,
        `no index of appointments leads with (org_id, ${column}): a few filter names its index, a many filter's comes from list_index (docs/design/lists.md)`,
      ).toBeGreaterThan(0)
      for (const text of [
        page('appointments', `k.${orderColumn} DESC, k.id DESC`, where),
        count('appointments', where),
      ]) {
        const plan = await planOf(testStore, orgId, text, [orgId, ...values])
        expect(plan, plan).toMatch(new RegExp(served.map((name) => `\\b${name}\\b`).join('|')))
        expect(plan, plan).not.toMatch(/Seq Scan|Sort/)
      }
    },
  )
})
