import type { FastifyInstance } from 'fastify'
import knex, { type Knex } from 'knex'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { patience } from '../../packages/client/test/helpers/patience.js'
import { ListFolder } from '../../src/domain/list-folder.js'
import { createPostgresStore } from '../../src/store/postgres/postgres.js'
import type { Store } from '../../src/store/types.js'
import { buildTestApp } from '../helpers/app.js'
import { bucketFaults } from '../helpers/buckets.js'
import { createKey, createOrg } from '../helpers/fixtures.js'
import { asOwner, expectPagesOfTables } from '../helpers/list-truth.js'
import {
  createTestDatabase,
  createTestRole,
  postgresAvailable,
  type TestDatabase,
  type TestRole,
} from '../helpers/stores.js'

// A booking application as Node developers write one: Knex, logged in as a member of
// openbook_writer (docs/writers.md), in READ COMMITTED and in SERIALIZABLE, with a savepoint
// (a nested transaction) and SELECT … FOR UPDATE; the server's background fold running. Totals, a
// deep page and the ETag then match the tables.

const ORG = 'org_knex'
const silentLog = { info: () => {}, warn: () => {}, error: () => {} } as unknown as ConstructorParameters<
  typeof ListFolder
>[1]

describe.skipIf(!postgresAvailable())('a booking application writing through Knex (PostgreSQL)', () => {
  let database: TestDatabase
  let store: Store
  let role: TestRole
  let db: Knex
  let app: FastifyInstance
  let key: string
  let folder: ListFolder

  beforeAll(async () => {
    database = await createTestDatabase({ migrated: true })
    store = createPostgresStore({ connectionString: database.url, maxConnections: 2 })
    const org = await createOrg(store, ORG)
    await asOwner(database.url, `INSERT INTO staff (org_id, id) VALUES ($1, 'stf_1'), ($1, 'stf_2')`, [ORG])
    await asOwner(
      database.url,
      `INSERT INTO customers (org_id, id, is_active, created_at, updated_at)
       SELECT $1, 'cus_' || g, true, timestamptz '2024-01-01' + g * interval '1 hour', now() FROM generate_series(1, 500) g`,
      [ORG],
    )
    await asOwner(
      database.url,
      `INSERT INTO appointments (org_id, id, customer_id, staff_id, start_at, end_at, status, is_active, created_at, updated_at)
       SELECT $1, 'apt_' || g, 'cus_' || (1 + g % 500), 'stf_' || (1 + g % 2), timestamptz '2024-01-01' + g * interval '2 hours',
              timestamptz '2024-01-01' + g * interval '2 hours' + interval '1 hour', 'scheduled', true, now(), now()
       FROM generate_series(1, 6000) g`,
      [ORG],
    )
    await asOwner(database.url, 'SELECT list_fold_all()')
    role = await createTestRole('openbook_writer')
    db = knex({
      client: 'pg',
      connection: database.url.replace('root@', `${role.name}@`),
      pool: { min: 0, max: 2 },
    })
    key = (await createKey(store, org)).key
    ;({ app } = await buildTestApp(store, { logLevel: 'silent' }))
    folder = new ListFolder(store.foldLists as NonNullable<Store['foldLists']>, silentLog, { everyMs: 200 })
    folder.start()
  }, patience(120_000))

  afterAll(async () => {
    await folder?.stop()
    await db?.destroy()
    await app?.close()
    await store?.close()
    await database?.drop()
    await role?.drop()
  })

  /** One booking screen's work in one transaction, run again on a serialization failure. */
  async function book(i: number, isolationLevel: 'read committed' | 'serializable'): Promise<void> {
    const now = new Date()
    for (;;) {
      try {
        await db.transaction(
          async (trx) => {
            const [{ level }] = (await trx.raw("SELECT current_setting('transaction_isolation') AS level"))
              .rows
            expect(level).toBe(isolationLevel)
            // The appointment to move, locked as an ORM locks the row it edits.
            const id = `apt_${1 + ((i * 37) % 6000)}`
            const row = await trx('appointments').where({ org_id: ORG, id }).forUpdate().first()
            expect(row?.id).toBe(id)
            const start = new Date(new Date(row.start_at).getTime() + 86_400_000)
            await trx('appointments')
              .where({ org_id: ORG, id })
              .update({
                start_at: start,
                end_at: new Date(start.getTime() + 3_600_000),
                day_key: start.toISOString().slice(0, 10),
                status: i % 2 === 0 ? 'confirmed' : 'checked_in',
                updated_at: now,
              })
            // A new customer and their first booking, with a staff member the list of staff offers.
            const staff = await trx('staff').where({ org_id: ORG, is_active: true }).orderBy('id').first()
            await trx('customers').insert({
              org_id: ORG,
              id: `cus_k${i}`,
              first_name: 'Kit',
              is_active: true,
              created_at: now,
              updated_at: now,
            })
            await trx('appointments').insert({
              org_id: ORG,
              id: `apt_k${i}`,
              customer_id: `cus_k${i}`,
              staff_id: staff.id,
              start_at: now,
              end_at: new Date(now.getTime() + 3_600_000),
              day_key: now.toISOString().slice(0, 10),
              status: 'scheduled',
              is_active: true,
              created_at: now,
              updated_at: now,
            })
            // A savepoint: a second booking tried and rolled back, the transaction going on.
            await trx
              .transaction(async (savepoint) => {
                await savepoint('appointments').insert({
                  org_id: ORG,
                  id: `apt_kx${i}`,
                  start_at: now,
                  end_at: now,
                  status: 'scheduled',
                  is_active: true,
                  created_at: now,
                  updated_at: now,
                })
                throw new Error('the slot was taken')
              })
              .catch((error: Error) => {
                if (error.message !== 'the slot was taken') throw error
              })
            if (i % 10 === 0)
              await trx('customers')
                .where({ org_id: ORG, id: `cus_${1 + (i % 500)}` })
                .update({ is_active: false })
          },
          { isolationLevel },
        )
        return
      } catch (error) {
        if ((error as { code?: string }).code !== '40001') throw error
      }
    }
  }

  it(
    'keeps totals, a deep page and the ETag those of the tables in READ COMMITTED and SERIALIZABLE',
    async () => {
      const [level] = await db
        .raw<{ rows: { role: string; member: boolean }[] }>(
          "SELECT current_user AS role, pg_has_role(current_user, 'openbook_writer', 'MEMBER') AS member",
        )
        .then((result) => result.rows)
      expect(level).toEqual({ role: role.name, member: true })
      for (let i = 0; i < 400; i++) await book(i, i % 2 === 0 ? 'serializable' : 'read committed')
      // What the savepoints rolled back is not there; what the transactions wrote is.
      const [written] = await asOwner<{ kept: number; rolled: number }>(
        database.url,
        `SELECT count(*) FILTER (WHERE id LIKE 'apt_k%' AND id NOT LIKE 'apt_kx%')::int AS kept,
              count(*) FILTER (WHERE id LIKE 'apt_kx%')::int AS rolled
       FROM appointments WHERE org_id = $1`,
        [ORG],
      )
      expect(written).toEqual({ kept: 400, rolled: 0 })
      // The folder's folds, the writers' own in READ COMMITTED, and the pending changes in between.
      const since = Date.now()
      for (;;) {
        const rows = await asOwner<{ n: number }>(
          database.url,
          'SELECT count(*)::int AS n FROM list_changes WHERE org_id = $1 GROUP BY list',
          [ORG],
        )
        if (rows.every((row) => row.n < 256)) break
        expect(Date.now() - since).toBeLessThan(patience(10_000))
        await new Promise((resolve) => setTimeout(resolve, 100))
      }
      expect(await bucketFaults(store)).toEqual([])
      await expectPagesOfTables(app, key, database.url, ORG)
    },
    patience(240_000),
  )
})
