import { setTimeout as sleep } from 'node:timers/promises'
import { beforeAll, expect, it } from 'vitest'
import type { Store } from '../../src/store/types.js'
import { createOrg } from '../helpers/fixtures.js'
import { describeEachStore } from '../helpers/stores.js'

const deadRows = (store: Store) =>
  store.admin(async (sql) => {
    const [row] = await sql.query<{ dead: number; vacuumed: boolean }>(
      `SELECT n_dead_tup::int AS dead, last_vacuum IS NOT NULL AS vacuumed
       FROM pg_stat_user_tables WHERE relname = 'customers'`,
    )
    return row
  })

/** A bulk write that fails after a while, as a cancelled import or seed does. */
async function failedLongWrite(store: Store, orgId: string): Promise<void> {
  await expect(
    store.admin(async (sql) => {
      await sql.query(
        `INSERT INTO customers (org_id, id, is_active, created_at, updated_at)
         SELECT $1, 'cus_' || i, true, now(), now() FROM generate_series(1, 5000) i`,
        [orgId],
      )
      await sleep(1_200)
      throw new Error('cancelled')
    }),
  ).rejects.toThrow('cancelled')
}

describeEachStore('maintenance on %s', (testStore) => {
  beforeAll(async () => {
    await createOrg(testStore.store, 'org_vac')
  })

  it('maintain runs VACUUM and CHECKPOINT, which no transaction may hold', async () => {
    // Right after a request-path read, whose COMMIT the embedded store sends with its next call.
    await testStore.store.read((sql) => sql.query('SELECT 1'))
    await testStore.store.maintain('VACUUM (ANALYZE) customers')
    await testStore.store.maintain('CHECKPOINT')
    await expect(testStore.store.admin((sql) => sql.exec('VACUUM customers'))).rejects.toThrow(
      /VACUUM cannot run inside a transaction block/,
    )
  })

  it.runIf(testStore.kind === 'embedded')(
    'a long operator transaction that fails is vacuumed at once (PGlite has no autovacuum)',
    async () => {
      await failedLongWrite(testStore.store, 'org_vac')
      // Statistics reach the views asynchronously; the vacuum itself has run by the time the call returned.
      let state = await deadRows(testStore.store)
      for (let i = 0; i < 20 && !state?.vacuumed; i++) {
        await sleep(100)
        state = await deadRows(testStore.store)
      }
      expect(state).toEqual({ dead: 0, vacuumed: true })
    },
  )
})
