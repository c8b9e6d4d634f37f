import type { FastifyInstance } from 'fastify'
import pg from 'pg'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { patience } from '../../packages/client/test/helpers/patience.js'
import { ListFolder } from '../../src/domain/list-folder.js'
import { Metrics } from '../../src/ops/metrics.js'
import { createPostgresStore } from '../../src/store/postgres/postgres.js'
import type { Store } from '../../src/store/types.js'
import { buildTestApp } from '../helpers/app.js'
import { bucketFaults } from '../helpers/buckets.js'
import { createKey, createOrg } from '../helpers/fixtures.js'
import { expectPagesOfTables } from '../helpers/list-truth.js'
import {
  createTestDatabase,
  createTestRole,
  postgresAvailable,
  type TestDatabase,
  type TestRole,
} from '../helpers/stores.js'

// The salon software may write in any isolation level: a writer's commit folds only in READ
// COMMITTED, so under REPEATABLE READ and SERIALIZABLE writers the changes stay pending unless
// openbook folds them itself (ListFolder, migration 017). Here a member of openbook_writer writes
// thousands of one-row transactions in SERIALIZABLE and REPEATABLE READ, and one of 20,000 rows in
// READ COMMITTED, into one organization while the server's folder runs; every list's pending
// changes then come down below the folder's threshold, and totals, a deep page and the ETag are
// those of the tables.

const ORG = 'org_folded'
/** A list with this many pending changes or more is folded by the next call (migration 017). */
const THRESHOLD = 256
const STATUSES = ['scheduled', 'confirmed', 'completed'] as const

const silentLog = {
  info: () => {},
  warn: () => {},
  error: () => {},
} as unknown as ConstructorParameters<typeof ListFolder>[1]

describe.skipIf(!postgresAvailable())(
  'lists folded by openbook whatever the writers’ isolation level (PostgreSQL)',
  () => {
    let database: TestDatabase
    let store: Store
    let writerRole: TestRole
    let app: FastifyInstance
    let key: string
    let folder: ListFolder
    const metrics = new Metrics({ version: 'test', contractVersion: 'test', listFolds: true })

    const asOwner = async <T extends pg.QueryResultRow>(
      sql: string,
      params: unknown[] = [],
    ): Promise<T[]> => {
      const client = new pg.Client({ connectionString: database.url })
      await client.connect()
      try {
        return (await client.query<T>(sql, params)).rows
      } finally {
        await client.end()
      }
    }
    const writer = async () => {
      const client = new pg.Client({ connectionString: database.url.replace('root@', `${writerRole.name}@`) })
      await client.connect()
      return client
    }
    /** Pending changes of each list of the organization. */
    const pending = async () =>
      asOwner<{ list: string; n: number }>(
        'SELECT list, count(*)::int AS n FROM list_changes WHERE org_id = $1 GROUP BY list ORDER BY list',
        [ORG],
      )

    beforeAll(async () => {
      database = await createTestDatabase({ migrated: true })
      store = createPostgresStore({ connectionString: database.url, maxConnections: 2 })
      const org = await createOrg(store, ORG)
      await asOwner(`INSERT INTO staff (org_id, id) SELECT $1, 'stf_' || g FROM generate_series(1, 4) g`, [
        ORG,
      ])
      await asOwner(
        `INSERT INTO customers (org_id, id, is_active, created_at, updated_at)
       SELECT $1, 'cus_' || g, g % 10 <> 0, timestamptz '2020-01-01' + g * interval '37 minutes', now()
       FROM generate_series(1, 5000) g`,
        [ORG],
      )
      await asOwner(
        `INSERT INTO appointments (org_id, id, staff_id, start_at, end_at, status, is_active, created_at, updated_at)
       SELECT $1, 'apt_' || g, 'stf_' || (1 + g % 4), timestamptz '2020-01-01' + g * interval '9 minutes',
              timestamptz '2020-01-01' + g * interval '9 minutes' + interval '30 minutes',
              ($2::text[])[1 + g % 3], g % 11 <> 0, now(), now()
       FROM generate_series(1, 20000) g`,
        [ORG, STATUSES],
      )
      await asOwner('SELECT list_fold_all()')
      await asOwner('ANALYZE')
      writerRole = await createTestRole('openbook_writer')
      key = (await createKey(store, org)).key
      ;({ app } = await buildTestApp(store, { logLevel: 'silent' }))
      const foldLists = store.foldLists
      if (!foldLists) throw new Error('the PostgreSQL store folds')
      folder = new ListFolder(foldLists, silentLog, { everyMs: 200, observer: metrics })
    }, patience(120_000))

    afterAll(async () => {
      await folder?.stop()
      await app?.close()
      await store?.close()
      await database?.drop()
      await writerRole?.drop()
    })

    /** `statements` one transaction each at `isolation`, run again on a serialization failure, as an ORM would. */
    async function writeEach(isolation: string, statements: readonly string[]): Promise<void> {
      const client = await writer()
      try {
        for (const statement of statements) {
          for (;;) {
            try {
              await client.query(`BEGIN ISOLATION LEVEL ${isolation}; ${statement}; COMMIT`)
              break
            } catch (error) {
              await client.query('ROLLBACK')
              if ((error as { code?: string }).code !== '40001') throw error
            }
          }
        }
      } finally {
        await client.end()
      }
    }

    it(
      'keeps every list below its threshold once the writers stop, with totals, a deep page and the ETag those of the tables',
      async () => {
        const serializable = Array.from({ length: 3_000 }, (_, i) =>
          i % 3 === 2
            ? `UPDATE appointments SET status = '${STATUSES[i % 3]}' WHERE org_id = '${ORG}' AND id = 'apt_${1 + ((i * 7) % 20000)}'`
            : `INSERT INTO appointments (org_id, id, staff_id, start_at, end_at, status, is_active, created_at, updated_at)
           VALUES ('${ORG}', 'apt_s${i}', 'stf_${1 + (i % 4)}', timestamptz '2021-01-01' + ${i} * interval '7 minutes',
                   timestamptz '2021-01-01' + ${i} * interval '7 minutes' + interval '1 hour', 'scheduled', true, now(), now())`,
        )
        const repeatable = Array.from({ length: 1_000 }, (_, i) =>
          i % 2 === 0
            ? `INSERT INTO customers (org_id, id, is_active, created_at, updated_at)
           VALUES ('${ORG}', 'cus_r${i}', true, timestamptz '2022-01-01' + ${i} * interval '1 hour', now())`
            : `UPDATE customers SET created_at = created_at + interval '1 day' WHERE org_id = '${ORG}' AND id = 'cus_${1 + i}'`,
        )
        folder.start()
        let peak = 0
        const sampling = setInterval(() => {
          void pending().then((rows) => {
            for (const row of rows) peak = Math.max(peak, row.n)
          })
        }, 250)
        try {
          await Promise.all([
            writeEach('SERIALIZABLE', serializable),
            writeEach('REPEATABLE READ', repeatable),
            (async () => {
              const client = await writer()
              try {
                // One transaction of 20,000 rows in READ COMMITTED: it folds its own changes at its commit.
                await client.query(
                  `BEGIN ISOLATION LEVEL READ COMMITTED;
               INSERT INTO appointments (org_id, id, staff_id, start_at, end_at, status, is_active, created_at, updated_at)
               SELECT '${ORG}', 'apt_b' || g, 'stf_' || (1 + g % 4), timestamptz '2023-01-01' + g * interval '3 minutes',
                      timestamptz '2023-01-01' + g * interval '3 minutes' + interval '1 hour', 'confirmed', true, now(), now()
               FROM generate_series(1, 20000) g;
               COMMIT`,
                )
              } finally {
                await client.end()
              }
            })(),
          ])
        } finally {
          clearInterval(sampling)
        }
        // The writers are done: within a few folds every list is below the threshold.
        const since = Date.now()
        for (;;) {
          const rows = await pending()
          if (rows.every((row) => row.n < THRESHOLD)) break
          expect(Date.now() - since, JSON.stringify(rows)).toBeLessThan(patience(10_000))
          await new Promise((resolve) => setTimeout(resolve, 100))
        }
        console.info(`most pending changes of one list while writing: ${peak}`)
        expect(await bucketFaults(store)).toEqual([])

        // Totals, a deep page and the ETag, over HTTP, against the tables.
        await expectPagesOfTables(app, key, database.url, ORG)
      },
      patience(300_000),
    )

    it('tells the metrics what it saw', async () => {
      await writeEach(
        'SERIALIZABLE',
        Array.from(
          { length: 40 },
          (_, i) =>
            `UPDATE appointments SET note = 'n${i}' WHERE org_id = '${ORG}' AND id = 'apt_${100 + i}'`,
        ),
      )
      await folder.stop()
      const before = await pending()
      await new ListFolder(store.foldLists as NonNullable<Store['foldLists']>, silentLog, {
        everyMs: 1_000,
        observer: metrics,
      }).once()
      const text = await metrics.text()
      const most = Math.max(...before.map((row) => row.n))
      // Below the threshold nothing is folded: the gauge shows the pending changes as they are.
      expect(text).toMatch(new RegExp(`^openbook_list_pending_changes ${most}$`, 'm'))
      expect(text).toMatch(/^openbook_list_pending_changes_all_lists \d+$/m)
      expect(text).toMatch(/^openbook_list_folds_total [1-9]\d*$/m)
    })

    it('folds a list left below the threshold once 10,000 newer changes were written', async () => {
      const small = ['org_quiet_1', 'org_quiet_2', 'org_quiet_3']
      for (const org of small) {
        await asOwner(`INSERT INTO organizations (id, name, plan) VALUES ($1, $1, 'free')`, [org])
        await asOwner(
          `INSERT INTO customers (org_id, id, is_active, created_at, updated_at)
           SELECT $1, 'cus_' || g, true, timestamptz '2024-01-01' + g * interval '1 day', now() FROM generate_series(1, 50) g`,
          [org],
        )
      }
      await asOwner('SELECT list_fold_all()')
      await writeEach(
        'REPEATABLE READ',
        small.map((org) => `UPDATE customers SET first_name = 'q' WHERE org_id = '${org}'`),
      )
      const once = () =>
        new ListFolder(store.foldLists as NonNullable<Store['foldLists']>, silentLog, {
          everyMs: 1_000,
        }).once()
      const quiet = async () =>
        (
          await asOwner<{ n: number }>(
            'SELECT count(*)::int AS n FROM list_changes WHERE org_id = ANY ($1)',
            [small],
          )
        )[0]?.n
      await once()
      // 50 changes a list: below the threshold, and new.
      expect(await quiet()).toBe(150)
      // 10,000 newer changes, of another organization's list (which the threshold folds).
      await writeEach('REPEATABLE READ', [
        `UPDATE appointments SET note = 'later' WHERE org_id = '${ORG}' AND id IN (SELECT id FROM appointments WHERE org_id = '${ORG}' AND is_active LIMIT 10500)`,
      ])
      await once()
      expect(await quiet()).toBe(0)
    })
  },
)
