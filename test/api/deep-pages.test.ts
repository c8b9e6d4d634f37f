import fc from 'fast-check'
import { beforeAll, expect, it } from 'vitest'
import { patience } from '../../packages/client/test/helpers/patience.js'
import { type AppointmentFilters, appointmentsPage } from '../../src/queries/appointments.js'
import { customersPage } from '../../src/queries/customers.js'
import { type PageStatement, SEEK_FROM } from '../../src/queries/page-statement.js'
import { APPOINTMENT_STATUSES } from '../../src/schemas/descriptions.js'
import { addAppointments, addCustomers, addStaff, createOrg } from '../helpers/fixtures.js'
import { fetchPage } from '../helpers/pages.js'
import { describeEachStore } from '../helpers/stores.js'

// A page deeper than SEEK_FROM starts at the end of the day its offset falls in, found from the
// per-day counts (customer_day_counts, appointment_day_counts), and steps over the rest of the
// offset within that day (src/queries/page.ts). The oracle here is the data itself: every page is
// its slice of the whole list in the contract's order, for offsets on both sides of SEEK_FROM, on
// and around the days' edges, past the end, with every filter the day counts answer and with a
// person filter (which reads from the nearer end instead), before and after writes move rows
// across days.

const DAY = 86_400_000
const T0 = Date.parse('2025-03-01T00:00:00.000Z')
const iso = (ms: number) => new Date(ms).toISOString()
const ORG = 'org_deep'
const STAFF = ['stf_a', 'stf_b', 'stf_c']

interface Row {
  id: string
  at: number
  isActive: boolean
  status?: string
  staffId?: string
}

/** Deterministic spread: a few busy days, ties on one instant, rows a millisecond from midnight. */
function instantOf(i: number): number {
  const day = (i * 7) % 23 < 9 ? (i * 7) % 23 : (i * 13) % 31
  switch (i % 5) {
    case 0:
      return T0 + day * DAY
    case 1:
      return T0 + day * DAY - 1
    case 2:
      return T0 + day * DAY + 9 * 3_600_000
    default:
      return T0 + day * DAY + ((i * 7_919_000) % DAY)
  }
}

const customersModel = (count: number): Row[] =>
  Array.from({ length: count }, (_, i) => ({
    id: `cus_${String(i).padStart(5, '0')}`,
    at: instantOf(i),
    isActive: i % 9 !== 4,
  }))

const appointmentsModel = (count: number): Row[] =>
  Array.from({ length: count }, (_, i) => ({
    id: `apt_${String(i).padStart(5, '0')}`,
    at: instantOf(i * 3 + 1),
    isActive: i % 13 !== 6,
    // Half of them completed, as in a salon's history: a status with pages deeper than SEEK_FROM.
    status:
      i % 2 === 0
        ? 'completed'
        : (APPOINTMENT_STATUSES[(i * 5) % APPOINTMENT_STATUSES.length] ?? 'scheduled'),
    staffId: STAFF[i % STAFF.length] ?? 'stf_a',
  }))

/** Newest first, the id breaking ties, as both lists order. */
const inOrder = (rows: readonly Row[]) =>
  [...rows].sort((a, b) => b.at - a.at || (a.id < b.id ? 1 : a.id > b.id ? -1 : 0))

interface Case {
  readonly list: 'customers' | 'appointments'
  readonly filters: AppointmentFilters
  readonly limit: number
  readonly offset: number
}

describeEachStore('pages deeper than the seek threshold on %s', (testStore) => {
  let customers: Row[]
  let appointments: Row[]

  const seedCustomers = (rows: readonly Row[]) =>
    addCustomers(
      testStore.store,
      ORG,
      rows.map((r) => ({ id: r.id, createdAt: iso(r.at), isActive: r.isActive })),
    )
  const seedAppointments = (orgId: string, rows: readonly Row[]) =>
    addAppointments(
      testStore.store,
      orgId,
      rows.map((r) => ({
        id: r.id,
        start: iso(r.at),
        isActive: r.isActive,
        status: r.status,
        staffId: r.staffId,
      })),
    )

  beforeAll(async () => {
    const { store } = testStore
    await createOrg(store, ORG)
    await createOrg(store, 'org_near')
    await addStaff(store, ORG, STAFF)
    await addStaff(store, 'org_near', STAFF)
    customers = customersModel(SEEK_FROM * 2 + 700)
    appointments = appointmentsModel(SEEK_FROM * 3 + 400)
    await seedCustomers(customers)
    await seedAppointments(ORG, appointments)
    // Another organization on the same days: its counts must not move anyone's pages.
    await addCustomers(
      store,
      'org_near',
      customers.slice(0, 900).map((r) => ({ id: r.id, createdAt: iso(r.at) })),
    )
    await seedAppointments('org_near', appointments.slice(0, 1200))
  }, patience(60_000))

  function expected({ list, filters, limit, offset }: Case): { ids: string[]; total: number } {
    const rows = (list === 'customers' ? customers : appointments).filter(
      (r) =>
        r.isActive &&
        (filters.status === undefined || r.status === filters.status) &&
        (filters.staffId === undefined || r.staffId === filters.staffId) &&
        (filters.startDate === undefined || r.at >= Date.parse(filters.startDate)) &&
        (filters.endDate === undefined || r.at <= Date.parse(filters.endDate)),
    )
    const ids = inOrder(rows).map((r) => r.id)
    return { ids: ids.slice(offset, offset + limit), total: ids.length }
  }

  const statementOf = (c: Case): PageStatement =>
    c.list === 'customers' ? customersPage(ORG) : appointmentsPage(ORG, c.filters)

  /** The page in both forms, as the request path reads it: as openbook_reader, for the organization. */
  async function check(c: Case): Promise<void> {
    const want = expected(c)
    const statement = statementOf(c)
    const label = JSON.stringify(c)
    for (const pageForm of ['rows', 'json'] as const) {
      const page = await testStore.store.read(async (sql) => {
        await sql.query("SELECT set_config('openbook.org_id', $1, true)", [ORG])
        return fetchPage({ pageForm }, sql, statement, { limit: c.limit, offset: c.offset })
      })
      const ids = (JSON.parse(`[${page.items}]`) as { id: string }[]).map((item) => item.id)
      expect(ids, `${pageForm} ${label}`).toEqual(want.ids)
      expect(page.pagination.total, `${pageForm} ${label}`).toBe(want.total)
      expect(page.pagination.hasMore, `${pageForm} ${label}`).toBe(c.offset + c.limit < want.total)
    }
  }

  /** Offsets where a day of the list ends, and a little either side: where a seek goes wrong first. */
  function dayEdges(c: Omit<Case, 'offset' | 'limit'>): number[] {
    const all = expected({ ...c, limit: Number.MAX_SAFE_INTEGER, offset: 0 }).ids
    const rows = new Map((c.list === 'customers' ? customers : appointments).map((r) => [r.id, r]))
    const edges: number[] = []
    all.forEach((id, index) => {
      const next = all[index + 1]
      const day = (key: string | undefined) => Math.floor((rows.get(key ?? '')?.at ?? 0) / DAY)
      if (next === undefined || day(id) !== day(next)) edges.push(index - 1, index, index + 1, index + 2)
    })
    return edges.filter((offset) => offset >= 0)
  }

  const statuses = fc.constantFrom(...APPOINTMENT_STATUSES)
  const instants = fc
    .integer({ min: -2, max: 33 })
    .chain((day) =>
      fc.constantFrom(T0 + day * DAY, T0 + day * DAY - 1, T0 + day * DAY + 1, T0 + day * DAY + 37_000_123),
    )
  const listAndFilters = fc.oneof(
    fc.constant({ list: 'customers' as const, filters: {} }),
    fc
      .record(
        { status: statuses, startDate: instants, endDate: instants, staffId: fc.constantFrom(...STAFF) },
        { requiredKeys: [] },
      )
      .map(({ status, startDate, endDate, staffId }) => ({
        list: 'appointments' as const,
        filters: {
          ...(status === undefined ? {} : { status }),
          ...(startDate === undefined ? {} : { startDate: iso(startDate) }),
          ...(endDate === undefined ? {} : { endDate: iso(endDate) }),
          ...(staffId === undefined ? {} : { staffId }),
        },
      })),
  )
  const cases = listAndFilters.chain((c) => {
    const { total } = expected({ ...c, limit: 0, offset: 0 })
    const edges = dayEdges(c)
    return fc.record({
      list: fc.constant(c.list),
      filters: fc.constant(c.filters),
      limit: fc.oneof(fc.constant(50), fc.integer({ min: 1, max: 100 })),
      offset: fc.oneof(
        fc.integer({ min: 0, max: total + 60 }),
        fc.integer({ min: SEEK_FROM - 3, max: SEEK_FROM + 3 }),
        edges.length > 0 ? fc.constantFrom(...edges) : fc.constant(total),
        fc.integer({ min: Math.max(0, total - 120), max: total + 3 }),
      ),
    })
  })

  it('pages that start on and around every edge of a day, for each filter the day counts answer', async () => {
    // Ranges wide enough for deep pages, their ends inside a day: part-days at both ends.
    const startDate = iso(T0 + 2 * DAY + 5 * 3_600_000)
    const endDate = iso(T0 + 27 * DAY + 13 * 3_600_000 + 1)
    const filterSets: AppointmentFilters[] = [
      {},
      { status: 'completed' },
      { startDate },
      { endDate },
      { startDate, endDate },
      { status: 'completed', startDate, endDate },
    ]
    for (const filters of filterSets) {
      const c = { list: 'appointments' as const, filters }
      const deep = dayEdges(c).filter((offset) => offset >= SEEK_FROM - 2)
      expect(deep.length, JSON.stringify(filters)).toBeGreaterThan(0)
      for (const offset of deep) await check({ ...c, limit: 7, offset })
    }
    for (const offset of dayEdges({ list: 'customers', filters: {} }).filter((o) => o >= SEEK_FROM - 2))
      await check({ list: 'customers', filters: {}, limit: 7, offset })
  })

  it('every page is its slice of the whole order, with its exact total', async () => {
    // Deep pages exist for the unfiltered lists and for a common status over all the days.
    expect(expected({ list: 'customers', filters: {}, limit: 0, offset: 0 }).total).toBeGreaterThan(
      SEEK_FROM * 2,
    )
    expect(
      expected({ list: 'appointments', filters: { status: 'completed' }, limit: 0, offset: 0 }).total,
    ).toBeGreaterThan(SEEK_FROM)
    // Where reading from the top gives way to the seek, and the seek to reading from the far end.
    for (const list of ['customers', 'appointments'] as const) {
      const { total } = expected({ list, filters: {}, limit: 0, offset: 0 })
      const farEdge = total - 50 - SEEK_FROM
      for (const offset of [
        0,
        SEEK_FROM - 1,
        SEEK_FROM,
        SEEK_FROM + 1,
        farEdge,
        farEdge + 1,
        farEdge - 1,
        total,
      ])
        await check({ list, filters: {}, limit: 50, offset })
    }
    await fc.assert(fc.asyncProperty(cases, check), { numRuns: 150, seed: 5150 })
  })

  it('stays so after writes move rows across days, deactivate and delete them', async () => {
    await testStore.store.admin(async (sql) => {
      await sql.query(
        `UPDATE customers SET created_at = created_at - interval '2 days 5 hours'
           WHERE org_id = $1 AND id < 'cus_00600'`,
        [ORG],
      )
      await sql.query(
        "UPDATE customers SET is_active = NOT is_active WHERE org_id = $1 AND id BETWEEN 'cus_01000' AND 'cus_01400'",
        [ORG],
      )
      await sql.query("DELETE FROM customers WHERE org_id = $1 AND id > 'cus_02500'", [ORG])
      await sql.query(
        `UPDATE appointments SET start_at = start_at + interval '3 days 1 hour',
             end_at = end_at + interval '3 days 1 hour', status = 'completed'
           WHERE org_id = $1 AND id < 'apt_00900'`,
        [ORG],
      )
      await sql.query("DELETE FROM appointments WHERE org_id = $1 AND id > 'apt_03200'", [ORG])
    })
    for (const c of customers) {
      if (c.id < 'cus_00600') c.at -= 2 * DAY + 5 * 3_600_000
      if (c.id >= 'cus_01000' && c.id <= 'cus_01400') c.isActive = !c.isActive
    }
    customers = customers.filter((c) => c.id <= 'cus_02500')
    for (const a of appointments) {
      if (a.id < 'apt_00900') {
        a.at += 3 * DAY + 3_600_000
        a.status = 'completed'
      }
    }
    appointments = appointments.filter((a) => a.id <= 'apt_03200')
    await fc.assert(fc.asyncProperty(cases, check), { numRuns: 80, seed: 5151 })
  })
})
