import { expect, it } from 'vitest'
import { customersPage } from '../../src/queries/customers.js'
import { DEMO_ORG_ID, seedDemoIfEmpty } from '../../src/seed/demo.js'
import { bucketFaults } from '../helpers/buckets.js'
import { fetchPage } from '../helpers/pages.js'
import { describeEachStore } from '../helpers/stores.js'

// The demo that a first start seeds is read at once, by the README's curl and by whoever tries
// the server: its lists are folded as a load's are, or each page would read every change its
// seeding wrote (the embedded store has no background fold, and the demo's lists are fewer
// entries than a writer's fold waits for).
describeEachStore('the demo organization on %s', (testStore) => {
  it('is seeded with its lists folded: nothing pending, buckets that hold every entry', async () => {
    expect(await seedDemoIfEmpty(testStore.store, 'ob')).toMatch(/^ob_test_[0-9a-f]{64}$/)
    const [pending] = await testStore.store.admin((sql) =>
      sql.query<{ n: number }>('SELECT count(*)::int AS n FROM list_changes WHERE org_id = $1', [
        DEMO_ORG_ID,
      ]),
    )
    expect(pending?.n).toBe(0)
    const folds = await testStore.store.admin((sql) =>
      sql.query<{ list: string; changes: number }>(
        'SELECT list, changes::int FROM list_folds WHERE org_id = $1 ORDER BY list',
        [DEMO_ORG_ID],
      ),
    )
    expect(folds.map((fold) => fold.list)).toEqual(['appointments', 'customers'])
    expect(await bucketFaults(testStore.store)).toEqual([])
    // The first page's total is the buckets' sum.
    const page = await testStore.store.read(async (sql) => {
      await sql.query("SELECT set_config('openbook.org_id', $1, true)", [DEMO_ORG_ID])
      return fetchPage(testStore.store.adapter, sql, customersPage(DEMO_ORG_ID), { limit: 5, offset: 0 })
    })
    const [active] = await testStore.store.admin((sql) =>
      sql.query<{ n: number }>('SELECT count(*)::int AS n FROM customers WHERE org_id = $1 AND is_active', [
        DEMO_ORG_ID,
      ]),
    )
    expect(page.pagination.total).toBe(active?.n)
    // A second start seeds nothing.
    expect(await seedDemoIfEmpty(testStore.store, 'ob')).toBeUndefined()
  })
})
