import pg from 'pg'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { createPostgresStore } from '../../src/store/postgres/postgres.js'
import { refreshStatistics } from '../../src/store/schema/migrate.js'
import type { Store } from '../../src/store/types.js'
import { createTestDatabase, postgresAvailable, type TestDatabase } from '../helpers/stores.js'

/** When each table was last analyzed, by name: the catalogs' and openbook's. */
async function lastAnalyzed(url: string): Promise<Map<string, string | null>> {
  const client = new pg.Client({ connectionString: url })
  await client.connect()
  try {
    const { rows } = await client.query<{ relname: string; last_analyze: string | null }>(
      `SELECT relname, last_analyze::text FROM pg_stat_all_tables
       WHERE relname IN ('pg_class', 'pg_attribute', 'customers', 'appointments', 'api_keys')`,
    )
    return new Map(rows.map((row) => [row.relname, row.last_analyze]))
  } finally {
    await client.end()
  }
}

/**
 * The statistics an import (and seed, and an embedded start) refreshes: openbook's tables only. A
 * database-wide ANALYZE by a non-superuser owner logs a WARNING for each catalog it may not analyze.
 */
describe.skipIf(!postgresAvailable())('refreshing statistics (PostgreSQL)', () => {
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

  it("analyzes openbook's own tables, and no catalog", async () => {
    await refreshStatistics(store)
    const after = await lastAnalyzed(database.url)
    for (const table of ['customers', 'appointments', 'api_keys'])
      expect(after.get(table), table).not.toBeNull()
    expect(after.get('pg_class')).toBeNull()
    expect(after.get('pg_attribute')).toBeNull()
  })
})
