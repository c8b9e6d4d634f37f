import { beforeAll, expect, it } from 'vitest'
import { appointmentsPage } from '../../src/queries/appointments.js'
import { customersPage } from '../../src/queries/customers.js'
import type { PageStatement } from '../../src/queries/page-statement.js'
import { addAppointments, addCustomers, addStaff, createOrg } from '../helpers/fixtures.js'
import { fetchPage } from '../helpers/pages.js'
import { describeEachStore } from '../helpers/stores.js'

/** Text that JSON must escape, or must pass as it is. */
const TEXT = 'q"uote \\ back / slash\nline\ttab \u0001\u001f </script> \u2028\u2029 Zoë 😀'

// Pages are read as rows (PostgreSQL, the items written from the rows' bytes) or as JSON the
// database writes (PGlite): both must produce the same bytes, so that a client cannot tell the
// stores apart. The rows made objects by pg and written by `itemsJson` (a connection that cannot
// hand its rows' bytes on) give the same bytes again.
describeEachStore('the two forms of a page on %s', (testStore) => {
  beforeAll(async () => {
    const { store } = testStore
    await createOrg(store, 'org_f')
    await addCustomers(store, 'org_f', [
      {
        id: 'cus_full',
        createdAt: '2025-01-01T00:00:00.007Z',
        firstName: TEXT,
        notes: TEXT,
        city: 'Zürich',
      },
      {
        id: 'cus_more',
        createdAt: '2025-01-02T10:20:30.400Z',
        dateOfBirth: '1990-04-05',
        marketingConsent: false,
      },
      { id: 'cus_bare', createdAt: '2025-01-03T00:00:00.000Z' },
      { id: 'cus_gone', createdAt: '2025-01-04T00:00:00.000Z', isActive: false },
      // Ties on the time: the id orders them, read from either end.
      ...['t1', 't2', 't3', 't4', 't5'].map((id) => ({
        id: `cus_${id}`,
        createdAt: '2025-01-05T00:00:00.000Z',
      })),
      ...['u1', 'u2'].map((id) => ({ id: `cus_${id}`, createdAt: '2024-12-31T23:59:59.999Z' })),
    ])
    await addStaff(store, 'org_f', ['stf_1'])
    await addAppointments(store, 'org_f', [
      {
        id: 'apt_full',
        start: '2025-03-01T09:00:00.000Z',
        status: 'completed',
        customerId: 'cus_full',
        staffId: 'stf_1',
        priceCents: 4500,
        amountPaidCents: 0,
        currency: 'EUR',
        note: TEXT,
        requiresPayment: true,
        dayKey: '2025-03-01',
      },
      { id: 'apt_bare', start: '2025-03-02T09:00:00.999Z' },
      ...['t1', 't2', 't3', 't4'].map((id) => ({ id: `apt_${id}`, start: '2025-03-01T09:00:00.000Z' })),
      { id: 'apt_gone', start: '2025-03-03T09:00:00.000Z', isActive: false },
    ])
  })

  async function bothForms(statement: PageStatement, limit: number, offset: number) {
    return testStore.store.admin(async (sql) => {
      // Both forms on the same store, whichever it declares (StoreAdapter.pageForm).
      const rows = await fetchPage({ pageForm: 'rows' }, sql, statement, { limit, offset })
      const json = await fetchPage({ pageForm: 'json' }, sql, statement, { limit, offset })
      const objects = await fetchPage({ pageForm: 'rows' }, { ...sql, queryInto: undefined }, statement, {
        limit,
        offset,
      })
      expect(String(objects.items)).toBe(String(rows.items))
      expect(objects.pagination).toEqual(rows.pagination)
      return { rows, json }
    })
  }

  it.each([
    ['customers', customersPage('org_f')],
    ['appointments', appointmentsPage('org_f', {})],
  ])('%s: the same items, byte for byte, and the same pagination', async (_name, statement) => {
    for (const [limit, offset] of [
      [50, 0],
      [1, 1],
      [2, 10],
    ] as const) {
      const { rows, json } = await bothForms(statement, limit, offset)
      expect(String(json.items)).toBe(String(rows.items))
      expect(json.pagination).toEqual(rows.pagination)
      expect(() => JSON.parse(`[${json.items}]`)).not.toThrow()
    }
    const { json } = await bothForms(statement, 50, 0)
    expect(JSON.parse(`[${json.items}]`).length).toBeGreaterThanOrEqual(2)
  })

  it.each([
    ['customers', customersPage('org_f')],
    ['appointments', appointmentsPage('org_f', {})],
  ])(
    '%s: every page, read from either end of the index, is its slice of the whole order',
    async (_name, statement) => {
      const { rows: whole } = await bothForms(statement, 100, 0)
      const all = JSON.parse(`[${whole.items}]`) as { id: string }[]
      const total = all.length
      expect(whole.pagination.total).toBe(total)
      for (const limit of [1, 2, 3, 4, 100]) {
        for (let offset = 0; offset <= total + 1; offset++) {
          const { rows, json } = await bothForms(statement, limit, offset)
          const expected = all.slice(offset, offset + limit).map((item) => item.id)
          const label = `limit ${limit} offset ${offset}`
          expect(
            JSON.parse(`[${rows.items}]`).map((item: { id: string }) => item.id),
            label,
          ).toEqual(expected)
          expect(String(json.items), label).toBe(String(rows.items))
          expect(rows.pagination, label).toEqual({ limit, offset, total, hasMore: offset + limit < total })
        }
      }
    },
  )

  it('writes the text exactly', async () => {
    const { json } = await bothForms(customersPage('org_f'), 50, 0)
    const full = JSON.parse(`[${json.items}]`).find((item: { id: string }) => item.id === 'cus_full')
    expect(full).toMatchObject({
      firstName: TEXT,
      notes: TEXT,
      city: 'Zürich',
      createdAt: '2025-01-01T00:00:00.007Z',
    })
  })
})
