import pg from 'pg'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { patience } from '../../packages/client/test/helpers/patience.js'
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
  let customerId: string
  let staffId: string

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
    await testStore.store.admin(async (sql) => {
      const [row] = await sql.query<{ customer_id: string; staff_id: string }>(
        'SELECT customer_id, staff_id FROM appointments WHERE org_id = $1 AND customer_id IS NOT NULL LIMIT 1',
        [orgId],
      )
      customerId = row?.customer_id ?? ''
      staffId = row?.staff_id ?? ''
    })
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

  it.each([
    ['status', 'AND k.status = $2', ['completed'], 'appointments_active_status_idx'],
    ['customerId', 'AND k.customer_id = $2', ['customer'], 'appointments_active_customer_idx'],
    // The count may read the index of the staff member and status together (migration 012): it
    // leads with the staff member too; the page needs the staff member's own, in list order.
    ['staffId', 'AND k.staff_id = $2', ['staff'], /appointments_active_staff(_status)?_idx/],
    [
      'date range',
      'AND k.start_at >= $2 AND k.start_at <= $3',
      ['2024-01-01T00:00:00Z', '2024-06-30T00:00:00Z'],
      'appointments_active_list_idx',
    ],
  ])(
    'appointments with %s: an index in list order, no sort, no sequential scan',
    async (_name, where, values, index) => {
      const params = [
        orgId,
        ...values.map((v) => (v === 'customer' ? customerId : v === 'staff' ? staffId : v)),
      ]
      for (const text of [
        page('appointments', 'k.start_at DESC, k.id DESC', where),
        count('appointments', where),
      ]) {
        const plan = await planOf(testStore, orgId, text, params)
        expect(plan, plan).toMatch(index)
        expect(plan, plan).not.toMatch(/Seq Scan|Sort/)
      }
    },
  )
})
