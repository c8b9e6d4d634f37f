import pg from 'pg'
import { afterAll, beforeAll, expect, it } from 'vitest'
import { bearer, buildTestApp, type TestApp } from '../helpers/app.js'
import { addCustomers, createKey, createOrg } from '../helpers/fixtures.js'
import { describeEachStore } from '../helpers/stores.js'

/**
 * Timestamps as imported (any offset, up to microseconds) and as the API writes them: UTC,
 * milliseconds with the rest cut, whatever the database's own time zone and DateStyle. On
 * PostgreSQL the page's rows carry them as PostgreSQL's text and Node writes the ISO form; PGlite
 * has to_char write them (queries/page.ts): the two must agree.
 */
const CASES = [
  ['cus_ms', '2025-01-01T00:00:00.007Z', '2025-01-01T00:00:00.007Z'],
  ['cus_us', '2025-01-02T00:00:00.123456Z', '2025-01-02T00:00:00.123Z'],
  ['cus_cut', '2025-01-03T23:59:59.999999Z', '2025-01-03T23:59:59.999Z'],
  ['cus_tenth', '2025-01-04T08:00:00.1+02:00', '2025-01-04T06:00:00.100Z'],
  ['cus_whole', '2025-01-05T12:00:00-03:30', '2025-01-05T15:30:00.000Z'],
  ['cus_old', '0999-06-01T00:00:00.05Z', '0999-06-01T00:00:00.050Z'],
  // The first and last instants the tables take (year 1 to 9999 in UTC), reached by an offset.
  ['cus_far', '9999-12-31T23:59:59.999999-00:00', '9999-12-31T23:59:59.999Z'],
  ['cus_first', '0001-01-01T01:00:00+01:00', '0001-01-01T00:00:00.000Z'],
] as const

describeEachStore('timestamps in pages on %s', (testStore) => {
  let test: TestApp
  let key: string

  beforeAll(async () => {
    if (testStore.url) {
      // Settings the request transaction must override: its connections open after this.
      const client = new pg.Client({ connectionString: testStore.url })
      await client.connect()
      try {
        await client.query(`DO $$ BEGIN
          EXECUTE format('ALTER DATABASE %I SET TimeZone = %L', current_database(), 'America/St_Johns');
          EXECUTE format('ALTER DATABASE %I SET DateStyle = %L', current_database(), 'SQL, DMY');
        END $$`)
      } finally {
        await client.end()
      }
    }
    const org = await createOrg(testStore.store, 'org_ts')
    key = (await createKey(testStore.store, org)).key
    await addCustomers(
      testStore.store,
      'org_ts',
      CASES.map(([id, createdAt]) => ({ id, createdAt })),
    )
    test = await buildTestApp(testStore.store)
  })

  afterAll(async () => {
    await test?.app.close()
  })

  it('writes every timestamp in UTC with milliseconds, the rest cut, on every page form', async () => {
    const response = await test.app.inject({ url: '/api/public/v1/customers', headers: bearer(key) })
    expect(response.statusCode).toBe(200)
    const items = response.json().data as { id: string; createdAt: string; updatedAt: string }[]
    const written = Object.fromEntries(items.map((item) => [item.id, [item.createdAt, item.updatedAt]]))
    expect(written).toEqual(Object.fromEntries(CASES.map(([id, , iso]) => [id, [iso, iso]])))
    // Newest first, as the instants order them.
    expect(items.map((item) => item.id).slice(0, 2)).toEqual(['cus_far', 'cus_whole'])
    expect(items.at(-1)?.id).toBe('cus_first')
  })

  it('does so a page at a time too (the items of a middle page)', async () => {
    const response = await test.app.inject({
      url: '/api/public/v1/customers?limit=2&offset=3',
      headers: bearer(key),
    })
    expect(response.statusCode).toBe(200)
    expect(response.json().data.map((item: { createdAt: string }) => item.createdAt)).toEqual([
      '2025-01-03T23:59:59.999Z',
      '2025-01-02T00:00:00.123Z',
    ])
  })
})
