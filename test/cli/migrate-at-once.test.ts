import { afterAll, describe, expect, it } from 'vitest'
import { patience } from '../../packages/client/test/helpers/patience.js'
import { LATEST_VERSION, readMigrations } from '../../src/store/schema/schema-version.js'
import { asOwner } from '../helpers/list-truth.js'
import { createTestDatabase, postgresAvailable, type TestDatabase } from '../helpers/stores.js'
import { json, openbook } from './run.js'

// Deployments run `openbook migrate` as every instance starts (an init container per pod, a
// release step per host): several of them meet on one database, a new one or one to upgrade.
// One applies the migrations, the others wait for it and find nothing to do; each migration is
// applied once, and every one of them exits 0.

const INSTANCES = 3

describe.skipIf(!postgresAvailable())(
  'openbook migrate run by several instances at once (PostgreSQL)',
  () => {
    const databases: TestDatabase[] = []
    afterAll(async () => {
      for (const database of databases) await database.drop()
    })

    it(
      'applies each migration once on a new database, and every run exits 0',
      async () => {
        const database = await createTestDatabase()
        databases.push(database)
        const runs = await Promise.all(
          Array.from({ length: INSTANCES }, () =>
            openbook(['migrate', '--json'], { DATABASE_URL: database.url }),
          ),
        )
        const results = runs.map((run) => json<{ version: number; applied: string[] }>(run))
        expect(results.map((result) => result.version)).toEqual(Array(INSTANCES).fill(LATEST_VERSION))
        // One of them applied everything; the others found the schema current.
        expect(results.map((result) => result.applied.length).sort((a, b) => b - a)).toEqual([
          readMigrations().length,
          ...Array(INSTANCES - 1).fill(0),
        ])
        const rows = await asOwner<{ version: number }>(
          database.url,
          'SELECT version FROM openbook_schema_migrations ORDER BY version',
        )
        expect(rows.map((row) => row.version)).toEqual(readMigrations().map((m) => m.version))
      },
      patience(120_000),
    )
  },
)
