import fc from 'fast-check'
import pg from 'pg'
import { beforeAll, expect, it } from 'vitest'
import { patience } from '../../packages/client/test/helpers/patience.js'
import { type AppointmentFilters, appointmentsPage } from '../../src/queries/appointments.js'
import { customersPage } from '../../src/queries/customers.js'
import { type PageStatement, SEEK_FROM } from '../../src/queries/page-statement.js'
import { bucketFaults } from '../helpers/buckets.js'
import { addAppointments, addCustomers, addStaff, createOrg } from '../helpers/fixtures.js'
import { fetchPage } from '../helpers/pages.js'
import { describeEachStore } from '../helpers/stores.js'

// Rows that share a day or an instant: the lists are cut into buckets by position
// (migration 013), at most 2,000 entries each, which split and merge themselves as
// rows are written. The oracle is the data: every page is its slice of the whole list in the
// contract's order, with its exact total, for an organization whose rows share one instant, one
// whose day holds 90 % of them, and one with a few rows a day over years; with date ranges whose
// ends fall inside the crowded instant or day, alone and with a status, a staff member or both
// (their bucket lists, migration 012); before and after writes that move, deactivate, delete and
// hand rows to another staff member; and the buckets themselves hold exactly the entries in their
// ranges.

const DAY = 86_400_000
const T = Date.parse('2025-01-01T09:00:00.000Z')
const iso = (ms: number) => new Date(ms).toISOString()
const STATUSES = ['completed', 'completed', 'scheduled', 'no_show', 'cancelled'] as const

interface Row {
  id: string
  at: number
  isActive: boolean
  status: string
  /** Appointments: most rows a busy staff member's (past a bucket's 2,000), some another's, some nobody's. */
  staffId: string | undefined
}

const STAFF = ['stf_busy', 'stf_quiet'] as const
const staffOf = (i: number) => (i % 9 === 4 ? undefined : i % 4 === 1 ? 'stf_quiet' : 'stf_busy')

type Shape = 'instant' | 'ninety' | 'sparse'
const SHAPES: readonly Shape[] = ['instant', 'ninety', 'sparse']

/** The instant of row `i` of a shape: all at T; 90 % on T's day (a third of them at T); one row every 19 hours. */
function instantOf(shape: Shape, i: number): number {
  if (shape === 'instant') return T
  if (shape === 'sparse') return T - i * 19 * 3_600_000
  if (i % 10 === 9) return T - (1 + ((i * 7) % 700)) * DAY - ((i * 3_607_000) % DAY)
  return i % 3 === 0 ? T : T - 9 * 3_600_000 + ((i * 7_919) % DAY)
}

const model = (shape: Shape, prefix: string, count: number): Row[] =>
  Array.from({ length: count }, (_, i) => ({
    id: `${prefix}_${String(i).padStart(5, '0')}`,
    at: instantOf(shape, i),
    isActive: i % 11 !== 5,
    status: STATUSES[i % STATUSES.length] ?? 'completed',
    staffId: staffOf(i),
  }))

const inOrder = (rows: readonly Row[]) =>
  [...rows].sort((a, b) => b.at - a.at || (a.id < b.id ? 1 : a.id > b.id ? -1 : 0))

describeEachStore('pages of rows that share a day or an instant on %s', (testStore) => {
  const data = new Map<Shape, { customers: Row[]; appointments: Row[] }>()
  const orgOf = (shape: Shape) => `org_${shape}`

  beforeAll(async () => {
    const { store } = testStore
    for (const shape of SHAPES) {
      const customers = model(shape, 'cus', 4_500)
      const appointments = model(shape, 'apt', 5_500)
      data.set(shape, { customers, appointments })
      await createOrg(store, orgOf(shape))
      await addStaff(store, orgOf(shape), STAFF)
      // In two writes each, so that the second adds to buckets the first made.
      for (const part of [customers.slice(0, 2_600), customers.slice(2_600)])
        await addCustomers(
          store,
          orgOf(shape),
          part.map((r) => ({ id: r.id, createdAt: iso(r.at), isActive: r.isActive })),
        )
      for (const part of [appointments.slice(0, 3_100), appointments.slice(3_100)])
        await addAppointments(
          store,
          orgOf(shape),
          part.map((r) => ({
            id: r.id,
            start: iso(r.at),
            isActive: r.isActive,
            status: r.status,
            ...(r.staffId ? { staffId: r.staffId } : {}),
          })),
        )
    }
  }, patience(120_000))

  interface Case {
    readonly shape: Shape
    readonly list: 'customers' | 'appointments'
    readonly filters: AppointmentFilters
    readonly limit: number
    readonly offset: number
  }

  function expected({ shape, list, filters, limit, offset }: Case): { ids: string[]; total: number } {
    const rows = data.get(shape)?.[list] ?? []
    const kept = rows.filter(
      (r) =>
        r.isActive &&
        (filters.status === undefined || r.status === filters.status) &&
        (filters.staffId === undefined || r.staffId === filters.staffId) &&
        (filters.startDate === undefined || r.at >= Date.parse(filters.startDate)) &&
        (filters.endDate === undefined || r.at <= Date.parse(filters.endDate)),
    )
    const ids = inOrder(kept).map((r) => r.id)
    return { ids: ids.slice(offset, offset + limit), total: ids.length }
  }

  const statementOf = (c: Case): PageStatement =>
    c.list === 'customers' ? customersPage(orgOf(c.shape)) : appointmentsPage(orgOf(c.shape), c.filters)

  async function check(c: Case): Promise<void> {
    const want = expected(c)
    const label = JSON.stringify(c)
    for (const pageForm of ['rows', 'json'] as const) {
      const page = await testStore.store.read(async (sql) => {
        await sql.query("SELECT set_config('openbook.org_id', $1, true)", [orgOf(c.shape)])
        return fetchPage({ pageForm }, sql, statementOf(c), { limit: c.limit, offset: c.offset })
      })
      const ids = (JSON.parse(`[${page.items}]`) as { id: string }[]).map((item) => item.id)
      expect(ids, `${pageForm} ${label}`).toEqual(want.ids)
      expect(page.pagination.total, `${pageForm} ${label}`).toBe(want.total)
    }
  }

  // Range ends on, just before and just after the crowded instant, at its day's edges, and far off.
  const ends = [T - 1, T, T + 1, T - 9 * 3_600_000, T + 15 * 3_600_000 - 1, T - 400 * DAY, T + DAY]
  const cases = fc
    .record({
      shape: fc.constantFrom(...SHAPES),
      list: fc.constantFrom('customers' as const, 'appointments' as const),
      status: fc.option(fc.constantFrom('completed', 'no_show'), { nil: undefined }),
      staffId: fc.option(fc.constantFrom(...STAFF), { nil: undefined }),
      startDate: fc.option(fc.constantFrom(...ends), { nil: undefined }),
      endDate: fc.option(fc.constantFrom(...ends), { nil: undefined }),
      limit: fc.oneof(fc.constant(50), fc.integer({ min: 1, max: 100 })),
      position: fc.double({ min: 0, max: 1.02, noNaN: true }),
    })
    .map(({ shape, list, status, staffId, startDate, endDate, limit, position }): Case => {
      const filters: AppointmentFilters =
        list === 'customers'
          ? {}
          : {
              ...(status === undefined ? {} : { status }),
              ...(staffId === undefined ? {} : { staffId }),
              ...(startDate === undefined ? {} : { startDate: iso(startDate) }),
              ...(endDate === undefined ? {} : { endDate: iso(endDate) }),
            }
      const { total } = expected({ shape, list, filters, limit: 0, offset: 0 })
      return { shape, list, filters, limit, offset: Math.floor(total * position) }
    })

  it('every page is its slice of the whole order, with its exact total, for every shape', async () => {
    expect(await bucketFaults(testStore.store)).toEqual([])
    for (const shape of SHAPES) {
      for (const list of ['customers', 'appointments'] as const) {
        const { total } = expected({ shape, list, filters: {}, limit: 0, offset: 0 })
        expect(total).toBeGreaterThan(4 * SEEK_FROM)
        // Around the seek's thresholds, bucket-sized steps, the middle and the end.
        for (const offset of [
          0,
          SEEK_FROM,
          1_999,
          2_000,
          2_001,
          Math.floor(total / 2),
          total - 50 - SEEK_FROM,
        ])
          await check({ shape, list, filters: {}, limit: 50, offset })
        await check({ shape, list, filters: {}, limit: 50, offset: total - 1 })
      }
    }
    await fc.assert(fc.asyncProperty(cases, check), { numRuns: 120, seed: 3333 })
  })

  it('stays so, and the buckets stay exact, after writes move, deactivate and delete rows', async () => {
    const { store } = testStore
    await store.admin(async (sql) => {
      // The crowded instant's rows spread out, and rows of other days moved onto it.
      await sql.query(
        `UPDATE customers SET created_at = created_at + interval '1 hour'
           WHERE org_id = $1 AND id < 'cus_01500'`,
        [orgOf('instant')],
      )
      await sql.query(
        `UPDATE customers SET created_at = $2 WHERE org_id = $1 AND id BETWEEN 'cus_03000' AND 'cus_04000'`,
        [orgOf('sparse'), iso(T)],
      )
      await sql.query(
        "UPDATE appointments SET status = 'no_show' WHERE org_id = $1 AND id < 'apt_02500' AND status = 'completed'",
        [orgOf('ninety')],
      )
      await sql.query("DELETE FROM appointments WHERE org_id = $1 AND id > 'apt_01200'", [orgOf('instant')])
      // Appointments handed from one staff member to the other, and some to nobody.
      await sql.query(
        `UPDATE appointments SET staff_id = CASE WHEN id < 'apt_01500' THEN NULL
           WHEN staff_id = 'stf_busy' THEN 'stf_quiet' ELSE 'stf_busy' END
         WHERE org_id = $1 AND id BETWEEN 'apt_01000' AND 'apt_03500'`,
        [orgOf('sparse')],
      )
      await sql.query(
        "UPDATE customers SET is_active = NOT is_active WHERE org_id = $1 AND id BETWEEN 'cus_00200' AND 'cus_03900'",
        [orgOf('ninety')],
      )
    })
    for (const c of data.get('instant')?.customers ?? []) if (c.id < 'cus_01500') c.at += 3_600_000
    for (const c of data.get('sparse')?.customers ?? [])
      if (c.id >= 'cus_03000' && c.id <= 'cus_04000') c.at = T
    for (const a of data.get('ninety')?.appointments ?? [])
      if (a.id < 'apt_02500' && a.status === 'completed') a.status = 'no_show'
    for (const a of data.get('sparse')?.appointments ?? [])
      if (a.id >= 'apt_01000' && a.id <= 'apt_03500')
        a.staffId = a.id < 'apt_01500' ? undefined : a.staffId === 'stf_busy' ? 'stf_quiet' : 'stf_busy'
    const instant = data.get('instant')
    if (instant) instant.appointments = instant.appointments.filter((a) => a.id <= 'apt_01200')
    for (const c of data.get('ninety')?.customers ?? [])
      if (c.id >= 'cus_00200' && c.id <= 'cus_03900') c.isActive = !c.isActive
    expect(await bucketFaults(store)).toEqual([])
    // The deleted appointments' buckets merged: at most one bucket per 500 entries and a few.
    const [buckets] = await store.admin((sql) =>
      sql.query<{ n: number }>(
        "SELECT count(*)::int AS n FROM buckets WHERE org_id = $1 AND list = 'appointments' AND filters = '{}'",
        [orgOf('instant')],
      ),
    )
    expect(buckets?.n).toBeLessThanOrEqual(4)
    await fc.assert(fc.asyncProperty(cases, check), { numRuns: 80, seed: 3334 })
  })

  // Two sessions of their own, on PostgreSQL: the store runs one operator transaction at a time.
  it.skipIf(testStore.kind !== 'postgres')(
    'stays exact when two writers add to the same crowded instant at once, neither waiting for the other',
    async () => {
      const { store } = testStore
      const org = 'org_writers'
      await createOrg(store, org)
      const insert = (prefix: string, from: number, count: number) =>
        `INSERT INTO customers (org_id, id, is_active, created_at, updated_at)
         SELECT '${org}', '${prefix}' || lpad(g::text, 5, '0'), true, '${iso(T)}', '${iso(T)}'
         FROM generate_series(${from}, ${from + count - 1}) g`
      // Buckets from cus_w00000, cus_w01000, cus_w02000 and cus_w03000 (1,500 entries).
      await store.admin((sql) => sql.query(insert('cus_w', 0, 4_500)))
      const [first, second] = [new pg.Client(testStore.url), new pg.Client(testStore.url)]
      await Promise.all([first.connect(), second.connect()])
      try {
        // The first writer fills the top bucket past 2,000 and holds its transaction open; the
        // second adds to the same bucket meanwhile (ids between the two writers'), without waiting
        // for the first: writers append their changes and share no row. Both commit, the folds
        // run at their commits, and the buckets hold every entry exactly.
        await first.query('BEGIN')
        await first.query(insert('cus_x', 1, 1_500))
        await second.query(insert('cus_w', 90_000, 1_200))
        await first.query('COMMIT')
      } finally {
        await Promise.all([first.end(), second.end()])
      }
      expect(await bucketFaults(store)).toEqual([])
      const [count] = await store.admin((sql) =>
        sql.query<{ n: number }>(
          `SELECT ((SELECT sum(n) FROM buckets WHERE org_id = $1 AND list = 'customers' AND filters = '{}')
             + (SELECT coalesce(sum(delta), 0) FROM list_changes WHERE org_id = $1 AND list = 'customers'))::int AS n`,
          [org],
        ),
      )
      expect(count?.n).toBe(4_500 + 1_500 + 1_200)
    },
  )
})
