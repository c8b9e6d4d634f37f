import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { createPostgresStore } from '../../src/store/postgres.js'
import type { Store } from '../../src/store/types.js'
import { bearer, buildTestApp } from '../helpers/app.js'
import { addCustomers, createKey, createOrg } from '../helpers/fixtures.js'
import { createTestDatabase, postgresAvailable, type TestDatabase } from '../helpers/stores.js'

/**
 * No re-planning in the steady state: with prepared statements on (the default), each request-path
 * statement is parsed and planned once per connection and then runs its generic plan; off (for
 * PgBouncer before 1.21 in transaction mode), nothing is left prepared on the connection.
 */
describe.skipIf(!postgresAvailable())('prepared statements on the request path (PostgreSQL)', () => {
  let database: TestDatabase
  beforeAll(async () => {
    database = await createTestDatabase({ migrated: true })
  })
  afterAll(async () => {
    await database?.drop()
  })

  /** 30 requests of each list through a pool of one connection, then that connection's prepared statements. */
  async function run(preparedStatements: boolean) {
    const store: Store = createPostgresStore({
      connectionString: database.url,
      maxConnections: 1,
      preparedStatements,
    })
    try {
      const org = await createOrg(store, `org_prep_${preparedStatements}`)
      await addCustomers(store, org.id, [{ id: 'cus_1', createdAt: '2025-01-01T00:00:00.000Z' }])
      const { key } = await createKey(store, org)
      const { app } = await buildTestApp(store, { logLevel: 'silent' })
      try {
        for (let i = 0; i < 30; i++) {
          for (const url of ['/api/public/v1/customers?limit=5', `/api/public/v1/appointments?offset=${i}`]) {
            const response = await app.inject({ url, headers: bearer(key) })
            expect(response.statusCode).toBe(200)
          }
        }
      } finally {
        await app.close()
      }
      return await store.admin((sql) =>
        sql.query<{ statement: string; generic: number; custom: number }>(
          `SELECT statement, generic_plans::int AS generic, custom_plans::int AS custom
           FROM pg_prepared_statements WHERE name LIKE 'openbook\\_%' ORDER BY statement`,
        ),
      )
    } finally {
      await store.close()
    }
  }

  it('on: each statement is planned once, then every execution uses its generic plan', async () => {
    const prepared = await run(true)
    expect(prepared.length).toBeGreaterThanOrEqual(2)
    for (const statement of prepared) {
      expect(statement.custom, statement.statement).toBe(0)
      expect(statement.generic, statement.statement).toBeGreaterThanOrEqual(30)
    }
  })

  it('off: no statement is left prepared on the connection', async () => {
    expect(await run(false)).toEqual([])
  })
})
