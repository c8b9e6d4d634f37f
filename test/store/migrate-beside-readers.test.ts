import pg from 'pg'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { patience } from '../../packages/client/test/helpers/patience.js'
import { createPostgresStore } from '../../src/store/postgres/postgres.js'
import { LATEST_VERSION, MigrationError, migrate, schemaState } from '../../src/store/schema/migrate.js'
import type { Store } from '../../src/store/types.js'
import { migrateTo } from '../helpers/migrate-to.js'
import { createTestDatabase, postgresAvailable, type TestDatabase } from '../helpers/stores.js'

// `openbook migrate` runs while the release before still serves requests. A request's transaction
// may hold a table that the migration needs next while it asks for one the migration already
// holds: PostgreSQL would end one of the two as deadlocked. The migration gives way instead (it
// waits for a lock at most a moment, rolls back whole and starts again), so the request goes on
// and the migration completes.

describe.skipIf(!postgresAvailable())('migrate beside the requests of the release before', () => {
  let database: TestDatabase
  let store: Store
  beforeAll(async () => {
    database = await createTestDatabase()
    store = createPostgresStore({ connectionString: database.url, maxConnections: 2 })
    // Release 1.1.0's schema: its lists in list_buckets, its triggers on appointments.
    await migrateTo(store, 12)
  }, patience(60_000))
  afterAll(async () => {
    await store?.close()
    await database?.drop()
  })

  it(
    "stops, changing nothing, when a writer's transaction holds its table every time, and names it",
    async () => {
      const writer = new pg.Client({ connectionString: database.url, application_name: 'salon_app' })
      await writer.connect()
      try {
        await writer.query('BEGIN')
        await writer.query("DELETE FROM appointments WHERE id = 'none'")
        const { rows } = await writer.query<{ pid: number }>('SELECT pg_backend_pid() AS pid')
        const failed = await migrate(store, { lockTries: 2 }).then(
          () => undefined,
          (error: unknown) => error,
        )
        expect(failed).toBeInstanceOf(MigrationError)
        expect((failed as Error).message).toMatch(
          new RegExp(
            `^gave way to other sessions 2 times in \\d+ s and changed nothing: appointments held by pid ${rows[0]?.pid} \\([^)]*salon_app\\) in a transaction since \\d{4}-\\d\\d-\\d\\dT[\\d:]+Z; run \`openbook migrate\` again once that transaction ends$`,
          ),
        )
        expect((await schemaState(store)).version).toBe(12)
      } finally {
        await writer.end()
      }
    },
    patience(60_000),
  )

  it(
    'gives way to a request that holds a table it needs and waits for one it holds: no deadlock, both complete',
    async () => {
      const request = new pg.Client({ connectionString: database.url })
      await request.connect()
      try {
        // The request reads the lists first (and holds them until it ends)…
        await request.query('BEGIN')
        await request.query('SELECT count(*) FROM list_buckets')
        const migrating = migrate(store)
        // …while the migration takes appointments (its triggers) and waits for list_buckets…
        await new Promise((resolve) => setTimeout(resolve, 300))
        // …then reads appointments.
        const read = await request.query('SELECT count(*)::int AS n FROM appointments')
        expect(read.rows[0]?.n).toBe(0)
        await request.query('COMMIT')
        const result = await migrating
        expect(result.version).toBe(LATEST_VERSION)
        expect(result.applied).toContain('014_lists_installed.sql')
      } finally {
        await request.end()
      }
    },
    patience(60_000),
  )
})
