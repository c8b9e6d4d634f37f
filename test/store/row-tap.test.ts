import { afterAll, beforeAll, describe, expect, it, vi } from 'vitest'
import { PageBytesWriter } from '../../src/queries/page-bytes.js'
import { createPostgresStore } from '../../src/store/postgres/postgres.js'
import type { RowSink, Store } from '../../src/store/types.js'
import { bearer, buildTestApp } from '../helpers/app.js'
import { dataRowValues } from '../helpers/data-rows.js'
import { addCustomers, createKey, createOrg } from '../helpers/fixtures.js'
import { createTestDatabase, postgresAvailable, type TestDatabase } from '../helpers/stores.js'

/**
 * The PostgreSQL store's connections hand the rows of the result a sink accepts on as their
 * DataRow messages' bytes (store/postgres/row-tap.ts), and every other message to pg as before:
 * the page's items are written from them (queries/page-bytes.ts). One connection, so that every
 * statement after a tapped one runs on the connection that was tapped.
 */
describe.skipIf(!postgresAvailable())("a result's rows handed on as bytes (PostgreSQL)", () => {
  let database: TestDatabase
  let store: Store
  beforeAll(async () => {
    database = await createTestDatabase({ migrated: true })
    store = createPostgresStore({ connectionString: database.url, maxConnections: 1 })
  })
  afterAll(async () => {
    await store?.close()
    await database?.drop()
  })

  /** A sink of the result with columns `a, b`: each row's fields as text, read from its bytes. */
  function sinkOf(columns = ['a', 'b']) {
    const rows: (string | null)[][] = []
    const sink: RowSink = {
      accepts: (fields) => fields.map((field) => field.name).join() === columns.join(),
      row(bytes, offset) {
        rows.push(dataRowValues(bytes, offset))
      },
    }
    return { sink, rows }
  }

  const ROWS =
    "SELECT g AS a, CASE WHEN g = 2 THEN NULL ELSE repeat('é', g) END AS b FROM generate_series(1, 3) g"

  it('gives the accepted result to the sink, and every other result, before and after, to pg', async () => {
    await store.admin(async (sql) => {
      expect(
        sql.queryInto,
        'the store reads rows as pg makes them: row-tap.ts found no parser to tap',
      ).toBeDefined()
      const { sink, rows } = sinkOf()
      await sql.queryInto?.(sink, `SELECT 'before' AS other; ${ROWS}; SELECT 'after' AS other`)
      expect(rows).toEqual([
        ['1', 'é'],
        ['2', null],
        ['3', 'ééé'],
      ])
      // The same statement afterwards, without a sink: pg's rows.
      expect(await sql.query(ROWS)).toEqual([
        { a: 1, b: 'é' },
        { a: 2, b: null },
        { a: 3, b: 'ééé' },
      ])
      const other = sinkOf(['x'])
      await sql.queryInto?.(other.sink, ROWS)
      expect(other.rows).toEqual([])
    })
  })

  it('leaves the connection as it was when the statement fails among the rows it hands on', async () => {
    const { sink, rows } = sinkOf()
    await expect(
      store.admin(
        (sql) =>
          sql.queryInto?.(sink, 'SELECT g AS a, (10 / (3 - g))::text AS b FROM generate_series(1, 5) g') ??
          Promise.resolve(),
      ),
    ).rejects.toMatchObject({ code: '22012' })
    expect(rows).toEqual([
      ['1', '5'],
      ['2', '10'],
    ])
    // The one connection, next: its rows are pg's again.
    expect(await store.admin((sql) => sql.query(ROWS))).toHaveLength(3)
  })

  it("serves a page's items from its rows' bytes", async () => {
    const org = await createOrg(store, 'org_tap')
    await addCustomers(store, org.id, [
      { id: 'cus_1', createdAt: '2025-01-01T00:00:00.000Z', firstName: 'Zoë "Z"' },
      { id: 'cus_2', createdAt: '2025-01-02T00:00:00.123Z' },
    ])
    const { key } = await createKey(store, org)
    const { app } = await buildTestApp(store, { logLevel: 'silent' })
    const written = vi.spyOn(PageBytesWriter.prototype, 'finish')
    try {
      const response = await app.inject({ url: '/api/public/v1/customers', headers: bearer(key) })
      expect(response.statusCode).toBe(200)
      expect(written).toHaveBeenCalledTimes(1)
      expect(response.json().data).toEqual([
        expect.objectContaining({ id: 'cus_2', createdAt: '2025-01-02T00:00:00.123Z' }),
        expect.objectContaining({ id: 'cus_1', firstName: 'Zoë "Z"' }),
      ])
    } finally {
      written.mockRestore()
      await app.close()
    }
  })
})
