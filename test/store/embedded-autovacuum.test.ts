import { setTimeout as sleep } from 'node:timers/promises'
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest'
import { createEmbeddedStore, type EmbeddedStoreOptions } from '../../src/store/embedded/embedded.js'
import type { MaintenanceRun } from '../../src/store/embedded/embedded-autovacuum.js'
import type { Store } from '../../src/store/types.js'
import { ndjson, organizationLines } from '../cli/fixtures.js'
import { openbook } from '../cli/run.js'
import { createOrg } from '../helpers/fixtures.js'
import { migratedDataDir } from '../helpers/stores.js'

interface TableState {
  readonly relname: string
  readonly rows: number
  readonly pages: number
  readonly visible: number
}

/** What a process finds in pg_class: PGlite's counters (pg_stat_*) do not outlive the process. */
const tableStates = (store: Store) =>
  store.admin((sql) =>
    sql.query<TableState>(
      `SELECT relname, reltuples::float8 AS rows, relpages AS pages, relallvisible AS visible
       FROM pg_class WHERE relname IN ('customers', 'appointments', 'list_changes') ORDER BY relname`,
    ),
  )

const dirs: { remove(): void }[] = []
afterAll(() => {
  for (const dir of dirs) dir.remove()
})

async function openStore(dir: string, autovacuum: EmbeddedStoreOptions['autovacuum']) {
  return createEmbeddedStore(dir, {
    shortLived: true,
    onLockLost: () => {},
    ...(autovacuum ? { autovacuum } : {}),
  })
}

describe('the embedded store after a load, with no operator command', () => {
  it.each([
    [
      'seed',
      (dir: string) =>
        openbook(['seed', '--orgs', '1', '--customers', '3000', '--appointments', '6000'], { DATA_DIR: dir }),
    ],
    [
      'import',
      (dir: string) => {
        const customers = Array.from({ length: 3_000 }, (_, n) => ({
          type: 'customer',
          id: `cus_many_${n}`,
          orgId: 'org_load',
          firstName: `Many${n}`,
          isActive: true,
          createdAt: '2025-01-01T00:00:00.000Z',
          updatedAt: '2025-01-01T00:00:00.000Z',
        }))
        return openbook(
          ['import', '-'],
          { DATA_DIR: dir },
          ndjson([...organizationLines('org_load', 'o@load.test'), ...customers]),
        )
      },
    ],
  ])(
    'after %s, the tables are analyzed, their visibility map set and the fold’s dead rows gone',
    async (_, load) => {
      const data = migratedDataDir()
      dirs.push(data)
      const result = await load(data.dir)
      expect(result.code, result.stderr).toBe(0)
      const store = await openStore(data.dir, false)
      try {
        const states = await tableStates(store)
        const customers = states.find((state) => state.relname === 'customers')
        const changes = states.find((state) => state.relname === 'list_changes')
        expect(customers?.rows).toBeGreaterThanOrEqual(3_000)
        // Index-only scans skip the heap only on all-visible pages: a vacuum sets them.
        expect(customers?.visible).toBe(customers?.pages)
        // The load's changes were folded into the buckets and deleted; a vacuum gave their pages up.
        expect(changes?.visible).toBe(changes?.pages)
      } finally {
        await store.close()
      }
    },
  )
})

describe("the embedded store's autovacuum in its idle time", () => {
  let data: { dir: string; remove(): void }
  let store: Store | undefined
  beforeAll(() => {
    data = migratedDataDir()
    dirs.push(data)
  })
  afterEach(async () => {
    await store?.close()
    store = undefined
  })

  it('vacuums a table once its writes pass the threshold, and a request that comes meanwhile succeeds', async () => {
    const runs: MaintenanceRun[] = []
    const during: Promise<unknown>[] = []
    const opened = await openStore(data.dir, {
      firstAfterMs: 60_000,
      everyMs: 60_000,
      afterWriteMs: 100,
      onRun: (run) => runs.push(run),
      // A request arriving while the table's VACUUM runs: it waits for it, then is answered.
      onBegun: () => during.push(opened.read((sql) => sql.query<{ one: number }>('SELECT 1 AS one'))),
    })
    store = opened
    await createOrg(opened, 'org_av')
    await opened.admin((sql) =>
      sql.query(
        `INSERT INTO customers (org_id, id, is_active, created_at, updated_at)
         SELECT 'org_av', 'cus_' || i, true, now(), now() FROM generate_series(1, 2000) i`,
      ),
    )
    for (let i = 0; i < 150 && !runs.some((run) => run.table === 'public.customers'); i++) await sleep(100)
    expect(runs.filter((run) => run.table === 'public.customers')).toEqual([
      expect.objectContaining({ statement: 'VACUUM (ANALYZE)' }),
    ])
    expect(during.length).toBeGreaterThan(0)
    for (const answer of await Promise.all(during)) expect(answer).toEqual([{ one: 1 }])

    // Below the threshold (50 + 20% of 2,000 dead rows): no look vacuums it again.
    runs.length = 0
    await opened.admin((sql) =>
      sql.query(`UPDATE customers SET updated_at = now() WHERE id IN ('cus_1', 'cus_2')`),
    )
    await sleep(600)
    expect(runs.filter((run) => run.table === 'public.customers')).toEqual([])
    // Past it: 500 rows updated leave 500 dead.
    await opened.admin((sql) =>
      sql.query(
        `UPDATE customers SET updated_at = now() WHERE id IN (SELECT 'cus_' || i FROM generate_series(1, 500) i)`,
      ),
    )
    for (let i = 0; i < 150 && !runs.some((run) => run.table === 'public.customers'); i++) await sleep(100)
    expect(runs.filter((run) => run.table === 'public.customers')).toEqual([
      expect.objectContaining({ statement: 'VACUUM (ANALYZE)' }),
    ])
    const [state] = await opened.admin((sql) =>
      sql.query<{ dead: number }>(
        `SELECT n_dead_tup::int AS dead FROM pg_stat_user_tables WHERE relname = 'customers'`,
      ),
    )
    expect(state?.dead).toBe(0)
  })

  it('looks soon after it opens: what a previous process left is vacuumed', async () => {
    // Rows written and deleted by a process without the autovacuum (PGlite's counters die with it).
    const before = await openStore(data.dir, false)
    await before.admin((sql) =>
      sql.query(
        `INSERT INTO customers (org_id, id, is_active, created_at, updated_at)
         SELECT 'org_av', 'cus_more_' || i, true, now(), now() FROM generate_series(1, 20000) i`,
      ),
    )
    await before.admin((sql) => sql.query(`DELETE FROM customers WHERE id LIKE 'cus_more_%'`))
    await before.admin((sql) => sql.exec('ANALYZE customers'))
    await before.close()
    const runs: MaintenanceRun[] = []
    store = await openStore(data.dir, { firstAfterMs: 100, onRun: (run) => runs.push(run) })
    for (let i = 0; i < 150 && !runs.some((run) => run.table === 'public.customers'); i++) await sleep(100)
    expect(runs.map((run) => run.table)).toContain('public.customers')
  })
})
