import pg from 'pg'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { APPOINTMENT_LIST, filterColumn } from '../../src/schemas/filters.js'
import { createPostgresStore } from '../../src/store/postgres/postgres.js'
import { listsWithoutIndex } from '../helpers/buckets.js'
import { createTestDatabase, postgresAvailable, type TestDatabase } from '../helpers/stores.js'

// A `many` filter counts and seeks along its lists' buckets: a described filter whose column the
// migrations do not keep lists for would answer total 0 whatever the data holds. Read from the
// migrated schema, not from data.

describe.skipIf(!postgresAvailable())('every many filter has its lists and their indexes', () => {
  let database: TestDatabase
  let client: pg.Client
  beforeAll(async () => {
    database = await createTestDatabase({ migrated: true })
    client = new pg.Client({ connectionString: database.url })
    await client.connect()
  })
  afterAll(async () => {
    await client?.end()
    await database?.drop()
  })

  const many = APPOINTMENT_LIST.filters.filter(
    (filter) => filter.compare === 'equals' && filter.rows === 'many',
  )

  it.each(many.map((filter) => [filter.param, filterColumn(APPOINTMENT_LIST, filter)]))(
    '%s (column %s)',
    async (param, column) => {
      const { rows } = await client.query<{ columns: string[] }>(
        "SELECT filter_columns AS columns FROM list_definitions WHERE list = 'appointments'",
      )
      const migration =
        `${param} is described rows: 'many' but no migration keeps its lists: add one that runs ` +
        `UPDATE list_definitions SET filter_columns = filter_columns || '{${column}}' WHERE list = 'appointments'; ` +
        `SELECT list_install('appointments'); SELECT list_index('appointments'); ` +
        `SELECT list_rebuild('appointments'); (docs/design/lists.md, adding a many filter)`
      expect(rows[0]?.columns ?? [], migration).toContain(column)
    },
  )

  it("every combination of a list's filters has its index (list_index creates them)", async () => {
    const store = createPostgresStore({ connectionString: database.url, maxConnections: 1 })
    try {
      expect(
        await listsWithoutIndex(store),
        "lists read without an index: the filter's migration runs SELECT list_index('<list>') (docs/design/lists.md)",
      ).toEqual([])
    } finally {
      await store.close()
    }
  })
})

describe.skipIf(!postgresAvailable())('the lists are read along their indexes', () => {
  let database: TestDatabase
  let client: pg.Client
  beforeAll(async () => {
    database = await createTestDatabase({ migrated: true })
    client = new pg.Client({ connectionString: database.url })
    await client.connect()
  })
  afterAll(async () => {
    await client?.end()
    await database?.drop()
  })

  it('every function that turns sorts off turns incremental sorts off too', async () => {
    // With enable_sort off alone, the planner may still read a list along an index that holds a
    // prefix of its order and sort the rest (Incremental Sort): with a third filter, one of
    // list_build's eight lists did so on data where the new column was empty.
    const { rows } = await client.query<{ name: string; config: string[] }>(
      `SELECT p.oid::regprocedure::text AS name, p.proconfig AS config FROM pg_proc p
       WHERE p.pronamespace = 'public'::regnamespace AND 'enable_sort=off' = ANY (p.proconfig)`,
    )
    expect(rows.map((row) => row.name)).toContain('list_build(text,text)')
    expect(
      rows.filter((row) => !row.config.includes('enable_incremental_sort=off')).map((row) => row.name),
      'these set enable_sort = off without enable_incremental_sort = off: ALTER FUNCTION … SET enable_incremental_sort = off in a migration',
    ).toEqual([])
  })
})
