import pg from 'pg'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { APPOINTMENT_LIST, filterColumn } from '../../src/schemas/filters.js'
import { createTestDatabase, postgresAvailable, type TestDatabase } from '../helpers/stores.js'

// A `many` filter counts and seeks along its lists' buckets: a described filter whose column the
// migrations do not keep lists for would answer total 0 whatever the data holds. Read from the
// migrated schema, not from data.

describe.skipIf(!postgresAvailable())('every many filter has its lists and its index', () => {
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
        `SELECT list_install('appointments'), list_rebuild('appointments'); and creates an index on ` +
        `appointments (org_id, ${column}, start_at DESC, id DESC) WHERE is_active (docs/design/lists.md)`
      expect(rows[0]?.columns ?? [], migration).toContain(column)
      const indexes = await client.query<{ name: string }>(
        `SELECT c.relname AS name FROM pg_index i JOIN pg_class c ON c.oid = i.indexrelid
         WHERE i.indrelid = 'appointments'::regclass AND i.indpred IS NOT NULL
           AND (SELECT array_agg(a.attname ORDER BY k.n) FROM unnest(i.indkey) WITH ORDINALITY k(attnum, n)
                JOIN pg_attribute a ON a.attrelid = i.indrelid AND a.attnum = k.attnum)
               @> ARRAY['org_id', $1::name, 'start_at', 'id']`,
        [column],
      )
      expect(indexes.rows.length, migration).toBeGreaterThan(0)
    },
  )
})
