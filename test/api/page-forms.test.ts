import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { appointmentsPage } from '../../src/queries/appointments.js'
import { customersPage } from '../../src/queries/customers.js'
import { fetchPage, type PageStatement } from '../../src/queries/page.js'
import type { Sql } from '../../src/store/types.js'
import { addAppointments, addCustomers, addStaff, createOrg } from '../helpers/fixtures.js'
import { createTestStore, postgresAvailable, STORE_KINDS, type TestStore } from '../helpers/stores.js'

/** Text that JSON must escape, or must pass as it is. */
const TEXT = 'q"uote \\ back / slash\nline\ttab \u0001\u001f </script> \u2028\u2029 Zoë 😀'

// Pages are read as rows (PostgreSQL) or as JSON the database writes (PGlite): both must
// produce the same bytes, so that a client cannot tell the stores apart.
describe.each(STORE_KINDS)('the two forms of a page on %s', (kind) => {
  describe.skipIf(kind === 'postgres' && !postgresAvailable())('', () => {
    let testStore: TestStore

    beforeAll(async () => {
      testStore = await createTestStore(kind)
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
      ])
    })

    afterAll(async () => {
      await testStore?.close()
    })

    async function bothForms(statement: PageStatement, limit: number, offset: number) {
      return testStore.store.admin(async (sql) => {
        const as = (jsonPages: boolean): Sql => ({ ...sql, jsonPages })
        const rows = await fetchPage(as(false), statement, { limit, offset })
        const json = await fetchPage(as(true), statement, { limit, offset })
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
        expect(json.items).toBe(rows.items)
        expect(json.pagination).toEqual(rows.pagination)
        expect(() => JSON.parse(`[${json.items}]`)).not.toThrow()
      }
      const { json } = await bothForms(statement, 50, 0)
      expect(JSON.parse(`[${json.items}]`).length).toBeGreaterThanOrEqual(2)
    })

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
})
