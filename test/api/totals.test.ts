import fc from 'fast-check'
import type { FastifyInstance } from 'fastify'
import { afterAll, beforeAll, expect, it } from 'vitest'
import { upsertRows } from '../../src/import/tables.js'
import {
  APPOINTMENT_FILTERS,
  type AppointmentFilters,
  appointmentsPage,
} from '../../src/queries/appointments.js'
import { APPOINTMENT_STATUSES } from '../../src/schemas/descriptions.js'
import { bearer, buildTestApp } from '../helpers/app.js'
import { bucketFaults } from '../helpers/buckets.js'
import { addAppointments, addCustomers, createKey, createOrg } from '../helpers/fixtures.js'
import { fetchPage } from '../helpers/pages.js'
import { describeEachStore } from '../helpers/stores.js'

type Status = (typeof APPOINTMENT_STATUSES)[number]

interface Appointment {
  id: string
  start: number
  status: Status
  isActive: boolean
  customerId?: string
  staffId?: string
  serviceId?: string
}

/** The people and services the appointments refer to, so that every id filter has values to take. */
const CUSTOMERS = ['cus_a', 'cus_b', 'cus_c']
const STAFF = ['stf_a', 'stf_b']
const SERVICES = ['svc_a', 'svc_b', 'svc_c']

const DAY = 86_400_000
const T0 = Date.parse('2025-06-01T00:00:00.000Z')
const iso = (ms: number) => new Date(ms).toISOString()

/** Instants that test the day arithmetic: midnights, a millisecond either side, and times between. */
const INSTANTS: number[] = []
for (let day = -1; day <= 7; day++) {
  const midnight = T0 + day * DAY
  INSTANTS.push(midnight - 1, midnight, midnight + 1, midnight + 9 * 3_600_000 + 123)
}

/** A deterministic spread of appointments over six days, many of them on those instants. */
function initialAppointments(): Appointment[] {
  const list: Appointment[] = []
  for (let i = 0; i < 240; i++) {
    const start = i % 3 === 0 ? (INSTANTS[i % INSTANTS.length] ?? T0) : T0 + ((i * 7_919_000) % (6 * DAY))
    list.push({
      id: `apt_${String(i).padStart(3, '0')}`,
      start,
      status: APPOINTMENT_STATUSES[i % APPOINTMENT_STATUSES.length] ?? 'scheduled',
      isActive: i % 11 !== 0,
      ...(i % 5 ? { customerId: CUSTOMERS[i % CUSTOMERS.length] } : {}),
      ...(i % 7 ? { staffId: STAFF[i % STAFF.length] } : {}),
      ...(i % 4 ? { serviceId: SERVICES[i % SERVICES.length] } : {}),
    })
  }
  return list
}

// The totals of status and date filters come from per-day counts kept by triggers plus an
// index count of the part-days (migration 003). The oracle here is the data itself.
describeEachStore('exact totals of status and date filters on %s', (testStore) => {
  let app: FastifyInstance
  let key: string
  let model: Appointment[]

  const seed = (list: readonly Appointment[]) => list.map(({ start, ...a }) => ({ ...a, start: iso(start) }))

  beforeAll(async () => {
    const { store } = testStore
    const org = await createOrg(store, 'org_days')
    await createOrg(store, 'org_other')
    for (const orgId of ['org_days', 'org_other']) {
      await addCustomers(
        store,
        orgId,
        CUSTOMERS.map((id) => ({ id, createdAt: iso(T0) })),
      )
      await store.admin(async (sql) => {
        await upsertRows(
          sql,
          'staff',
          STAFF.map((id) => ({ org_id: orgId, id })),
        )
        await upsertRows(
          sql,
          'service',
          SERVICES.map((id) => ({ org_id: orgId, id })),
        )
      })
    }
    model = initialAppointments()
    await addAppointments(store, org.id, seed(model))
    // Another organization's appointments on the same days must not count.
    await addAppointments(store, 'org_other', seed(model.slice(0, 60)))
    key = (await createKey(store, org)).key
    ;({ app } = await buildTestApp(store, { logLevel: 'silent' }))
  })

  afterAll(async () => {
    await app?.close()
  })

  async function total(query: Record<string, string>): Promise<number> {
    const search = new URLSearchParams({ limit: '1', ...query })
    const response = await app.inject({
      url: `/api/public/v1/appointments?${search}`,
      headers: bearer(key),
    })
    expect(response.statusCode, response.body).toBe(200)
    return response.json().pagination.total
  }

  const filter = fc.record(
    {
      status: fc.constantFrom(...APPOINTMENT_STATUSES),
      from: fc.constantFrom(...INSTANTS),
      to: fc.constantFrom(...INSTANTS),
    },
    { requiredKeys: [] },
  )

  async function checkTotals(runs: number): Promise<void> {
    await fc.assert(
      fc.asyncProperty(filter, async ({ status, from, to }) => {
        if (from !== undefined && to !== undefined && to < from) return
        const query: Record<string, string> = {}
        if (status) query.status = status
        if (from !== undefined) query.startDate = iso(from)
        if (to !== undefined) query.endDate = iso(to)
        const expected = model.filter(
          (a) =>
            a.isActive &&
            (!status || a.status === status) &&
            (from === undefined || a.start >= from) &&
            (to === undefined || a.start <= to),
        ).length
        expect(await total(query), JSON.stringify(query)).toBe(expected)
      }),
      { numRuns: runs, seed: 4242 },
    )
  }

  /**
   * The buckets and the pending changes hold exactly what the rows give, and so does the
   * organization count an earlier release reads (the appointment_counts view).
   */
  async function expectCountsConsistent(): Promise<void> {
    expect(await bucketFaults(testStore.store)).toEqual([])
    const orgDrift = await testStore.store.admin((sql) =>
      sql.query(`SELECT * FROM (SELECT org_id, count(*)::int AS n FROM appointments WHERE is_active GROUP BY 1) truth
           FULL JOIN (SELECT * FROM appointment_counts WHERE n > 0) kept USING (org_id)
           WHERE truth.n IS DISTINCT FROM kept.n`),
    )
    expect(orgDrift).toEqual([])
  }

  it('every combination of status, start and end, at and around midnight', async () => {
    await expectCountsConsistent()
    await checkTotals(150)
  })

  /**
   * How the property below picks values for a filter and decides which appointments it keeps.
   * An id or enum filter takes its name from the item field it compares with (the values are
   * those the seeded appointments hold, plus one none holds); a bound names its field and side.
   */
  const BOUNDS: Readonly<Record<string, { field: 'start'; side: 'from' | 'to' }>> = {
    startDate: { field: 'start', side: 'from' },
    endDate: { field: 'start', side: 'to' },
  }

  function filterCase(name: keyof AppointmentFilters) {
    const bound = BOUNDS[name]
    if (bound) {
      return {
        values: INSTANTS.map(iso),
        keeps: (a: Appointment, value: string) =>
          bound.side === 'from' ? a[bound.field] >= Date.parse(value) : a[bound.field] <= Date.parse(value),
      }
    }
    const field = (a: Appointment) => (a as unknown as Record<string, unknown>)[name]
    const held = [...new Set(model.map(field).filter((v): v is string => typeof v === 'string'))]
    if (held.length === 0) throw new Error(`no appointment holds a value for the filter ${name}: seed one`)
    return {
      values: [...held, `${name}_none`],
      keeps: (a: Appointment, value: string) => field(a) === value,
    }
  }

  it('every filter the query layer knows, alone and combined: the total is the number of items', async () => {
    // Taken from the query layer's own list: a filter added there is covered here the same day.
    const cases = new Map(APPOINTMENT_FILTERS.map((name) => [name, filterCase(name)]))
    const filters = fc.record(
      Object.fromEntries([...cases].map(([name, c]) => [name, fc.constantFrom(...c.values)])),
      { requiredKeys: [] },
    ) as fc.Arbitrary<Partial<Record<keyof AppointmentFilters, string>>>
    await fc.assert(
      fc.asyncProperty(filters, async (given) => {
        const expected = model
          .filter((a) => a.isActive)
          .filter((a) =>
            Object.entries(given).every(([name, value]) =>
              cases.get(name as keyof AppointmentFilters)?.keeps(a, value as string),
            ),
          )
          .map((a) => a.id)
          .sort()
        const page = await testStore.store.read(async (sql) => {
          await sql.query("SELECT set_config('openbook.org_id', $1, true)", ['org_days'])
          return fetchPage(testStore.store.adapter, sql, appointmentsPage('org_days', given), {
            limit: 500,
            offset: 0,
          })
        })
        const ids = (JSON.parse(`[${page.items}]`) as { id: string }[]).map((item) => item.id).sort()
        const label = `${JSON.stringify(given)}: ${ids.length} items came back with total ${page.pagination.total}`
        expect(ids, label).toEqual(expected)
        expect(page.pagination.total, label).toBe(expected.length)
      }),
      { numRuns: 200, seed: 4243 },
    )
  })

  it('stays exact through updates, deletes and re-imports', async () => {
    const { store } = testStore
    await store.admin(async (sql) => {
      // Move some across days, change statuses, deactivate and reactivate, delete a few.
      await sql.query(
        `UPDATE appointments SET start_at = start_at + interval '1 day 3 hours',
             end_at = end_at + interval '1 day 3 hours', status = 'completed'
           WHERE org_id = 'org_days' AND id < 'apt_040'`,
      )
      await sql.query(
        "UPDATE appointments SET is_active = NOT is_active WHERE org_id = 'org_days' AND id BETWEEN 'apt_100' AND 'apt_130'",
      )
      await sql.query("DELETE FROM appointments WHERE org_id = 'org_days' AND id > 'apt_220'")
    })
    for (const a of model) {
      if (a.id < 'apt_040') {
        a.start += DAY + 3 * 3_600_000
        a.status = 'completed'
      }
      if (a.id >= 'apt_100' && a.id <= 'apt_130') a.isActive = !a.isActive
    }
    model = model.filter((a) => a.id <= 'apt_220')
    // An import's upsert: new rows and changed rows in one statement.
    const changed = model
      .slice(40, 70)
      .map((a) => ({ ...a, status: 'no_show' as Status, start: a.start - DAY }))
    const added: Appointment[] = [
      { id: 'apt_new1', start: T0 + 2 * DAY, status: 'confirmed', isActive: true },
      { id: 'apt_new2', start: T0 + 2 * DAY - 1, status: 'confirmed', isActive: true },
    ]
    await addAppointments(store, 'org_days', seed([...changed, ...added]))
    model = [...model.map((a) => changed.find((c) => c.id === a.id) ?? a), ...added]
    await expectCountsConsistent()
    await checkTotals(100)
  })

  it('an operator transaction that fails leaves the counts as they were', async () => {
    const before = await total({})
    await expect(
      testStore.store.admin(async (sql) => {
        await sql.query("DELETE FROM appointments WHERE org_id = 'org_days'")
        throw new Error('abandoned')
      }),
    ).rejects.toThrow('abandoned')
    expect(await total({})).toBe(before)
    await expectCountsConsistent()
  })
})

describeEachStore('exact customer totals on %s', (testStore) => {
  let app: FastifyInstance
  let key: string

  beforeAll(async () => {
    const org = await createOrg(testStore.store, 'org_people')
    await createOrg(testStore.store, 'org_other')
    const people = (prefix: string, n: number) =>
      Array.from({ length: n }, (_, i) => ({
        id: `${prefix}_${String(i).padStart(3, '0')}`,
        createdAt: iso(T0 + i * 5 * 3_600_000),
        isActive: i % 4 !== 0,
      }))
    await addCustomers(testStore.store, org.id, people('cus', 40))
    await addCustomers(testStore.store, 'org_other', people('cus', 25))
    key = (await createKey(testStore.store, org)).key
    ;({ app } = await buildTestApp(testStore.store, { logLevel: 'silent' }))
  })

  afterAll(async () => {
    await app?.close()
  })

  const total = async () =>
    (await app.inject({ url: '/api/public/v1/customers?limit=1', headers: bearer(key) })).json().pagination
      .total

  /** The buckets, the pending changes and the count an earlier release reads hold what the rows give. */
  async function expectConsistent(): Promise<void> {
    expect(await bucketFaults(testStore.store)).toEqual([])
    const drift = await testStore.store.admin((sql) =>
      sql.query(`SELECT * FROM (SELECT org_id, count(*)::int AS n FROM customers WHERE is_active GROUP BY 1) truth
           FULL JOIN (SELECT * FROM customer_counts WHERE n > 0) kept USING (org_id)
           WHERE truth.n IS DISTINCT FROM kept.n`),
    )
    expect(drift).toEqual([])
  }

  it('follows inserts, updates, deletes and upserts, and ignores other organizations', async () => {
    expect(await total()).toBe(30)
    await expectConsistent()
    await testStore.store.admin(async (sql) => {
      await sql.query("UPDATE customers SET is_active = false WHERE org_id = 'org_people' AND id < 'cus_010'")
      await sql.query("DELETE FROM customers WHERE org_id = 'org_people' AND id >= 'cus_035'")
    })
    // cus_000..009: 7 active made inactive; cus_035..039: 4 active deleted.
    expect(await total()).toBe(19)
    await addCustomers(testStore.store, 'org_people', [
      { id: 'cus_000', createdAt: iso(T0), isActive: true },
      { id: 'cus_new', createdAt: iso(T0 + DAY), isActive: true },
    ])
    expect(await total()).toBe(21)
    await expectConsistent()
  })
})
