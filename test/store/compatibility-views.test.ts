import { readFileSync } from 'node:fs'
import { join } from 'node:path'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { patience } from '../../packages/client/test/helpers/patience.js'
import { createPostgresStore } from '../../src/store/postgres/postgres.js'
import type { Store } from '../../src/store/types.js'
import { listsWithoutIndex } from '../helpers/buckets.js'
import { addAppointments, addCustomers, addStaff, createOrg } from '../helpers/fixtures.js'
import { ROOT } from '../helpers/process.js'
import { createTestDatabase, postgresAvailable, type TestDatabase } from '../helpers/stores.js'

// Release 12 (1.1.0) serves the schema during a rolling upgrade and after a rollback
// (`compatible-from: 12`). It reads its totals and versions from the views that took its tables'
// names (migration 014): customer_counts, appointment_counts, list_buckets and list_versions.
// Every one of its reads must agree with the rows and with what this release reads, for every
// list it knows, whatever lists this schema keeps beside them: also after docs/design/lists.md's
// recipe for a `many` filter, which release 12 knows nothing of.

/** docs/design/lists.md's migration for a `many` filter, as printed there. */
function recipe(): string {
  const guide = readFileSync(join(ROOT, 'docs/design/lists.md'), 'utf8')
  const section = guide.slice(guide.indexOf('## Adding a `many` filter'))
  const block = /```sql\n([\s\S]*?)```/.exec(section)?.[1]
  if (!block?.includes('service_id')) throw new Error("lists.md's recipe for a many filter is gone")
  return block
}

const ORGS = ['org_compat_a', 'org_compat_b'] as const
const STATUSES = ['scheduled', 'confirmed', 'completed', 'cancelled', 'no_show'] as const
const T = Date.parse('2026-03-01T09:00:00.000Z')

/**
 * Each of release 12's reads that differs from the rows (totals) or from this release's version,
 * one line each; empty when every read is exact.
 */
async function wrongReads(store: Store): Promise<string[]> {
  return store.admin(async (sql) => {
    const totals = await sql.query<{ what: string }>(
      `WITH expected AS (
         SELECT org_id, 'customers' AS list, count(*)::int AS n FROM customers WHERE is_active GROUP BY 1
         UNION ALL
         -- Every list of release 12 an appointment is in: unfiltered, its status, its staff member, both.
         SELECT a.org_id, l.list, count(*)::int
         FROM appointments a CROSS JOIN LATERAL (VALUES
           ('appointments'),
           ('appointments:' || a.status),
           ('appointments:staff:' || a.staff_id),
           ('appointments:' || a.status || ':staff:' || a.staff_id)) l(list)
         WHERE a.is_active AND l.list IS NOT NULL GROUP BY 1, 2),
       read AS (
         SELECT org_id, list, sum(n)::int AS n FROM list_buckets GROUP BY 1, 2
         UNION ALL
         SELECT org_id, 'counts:customers', n FROM customer_counts
         UNION ALL
         SELECT org_id, 'counts:appointments', n FROM appointment_counts),
       wanted AS (
         SELECT org_id, list, n FROM expected
         UNION ALL
         SELECT org_id, 'counts:' || list, n FROM expected WHERE list IN ('customers', 'appointments'))
       SELECT format('%s %s: release 12 reads %s, the rows hold %s', coalesce(w.org_id, r.org_id),
                     coalesce(w.list, r.list), coalesce(r.n, 0), coalesce(w.n, 0)) AS what
       FROM wanted w FULL JOIN read r ON r.org_id = w.org_id AND r.list = w.list
       WHERE coalesce(r.n, 0) <> coalesce(w.n, 0)
       ORDER BY 1`,
    )
    const versions = await sql.query<{ what: string }>(
      `WITH current AS (
         SELECT v.org_id, v.list, sum(v.n)::bigint AS version
         FROM (SELECT org_id, list, changes AS n FROM list_folds
               UNION ALL SELECT org_id, list, 1 FROM list_changes) v
         GROUP BY 1, 2)
       SELECT format('%s %s: release 12 reads version %s, this release %s', coalesce(c.org_id, v.org_id),
                     coalesce(c.list, v.list), v.version, c.version) AS what
       FROM current c FULL JOIN list_versions v ON v.org_id = c.org_id AND v.list = c.list
       WHERE v.version IS DISTINCT FROM c.version
       ORDER BY 1`,
    )
    return [...totals, ...versions].map((row) => row.what)
  })
}

describe.skipIf(!postgresAvailable())("release 12's reads of this schema (its compatibility views)", () => {
  let database: TestDatabase
  let store: Store
  beforeAll(async () => {
    database = await createTestDatabase({ migrated: true })
    store = createPostgresStore({ connectionString: database.url, maxConnections: 2 })
    for (const [o, org] of ORGS.entries()) {
      await createOrg(store, org)
      await addStaff(store, org, ['stf_1', 'stf_2', 'stf_3'])
      await store.admin((sql) =>
        sql.query(
          "INSERT INTO services (org_id, id, name) VALUES ($1, 'svc_cut', 'Cut'), ($1, 'svc_colour', 'Colour')",
          [org],
        ),
      )
      // Ids that the two organizations share, as two salons' do.
      await addCustomers(
        store,
        org,
        Array.from({ length: 300 + o * 50 }, (_, i) => ({
          id: `cus_${i}`,
          createdAt: new Date(T - i * 60_000).toISOString(),
          isActive: i % 11 !== 3,
        })),
      )
      await addAppointments(
        store,
        org,
        Array.from({ length: 2_500 + o * 700 }, (_, i) => ({
          id: `apt_${i}`,
          // A third on one instant, as a migration import leaves them.
          start: new Date(i % 3 === 0 ? T : T - i * 600_000).toISOString(),
          status: STATUSES[i % STATUSES.length],
          isActive: i % 17 !== 5,
          ...(i % 7 === 0 ? {} : { staffId: `stf_${(i % 3) + 1}` }),
          ...(i % 5 === 0 ? {} : { serviceId: i % 2 === 0 ? 'svc_cut' : 'svc_colour' }),
        })),
      )
    }
  }, patience(120_000))
  afterAll(async () => {
    await store?.close()
    await database?.drop()
  })

  /** Writes that leave changes pending: moves between lists, deactivations, inserts, deletes. */
  async function writeAFew(round: number): Promise<void> {
    await store.admin(async (sql) => {
      await sql.query(
        `UPDATE appointments SET status = 'completed', staff_id = 'stf_2'
         WHERE org_id = $1 AND id IN ('apt_${round}1', 'apt_${round}2', 'apt_${round}3')`,
        [ORGS[0]],
      )
      await sql.query(
        `UPDATE appointments SET is_active = false WHERE org_id = $1 AND id = 'apt_${round}4'`,
        [ORGS[1]],
      )
      await sql.query(`DELETE FROM appointments WHERE org_id = $1 AND id = 'apt_${round}6'`, [ORGS[1]])
      await sql.query(`UPDATE customers SET is_active = false WHERE org_id = $1 AND id = 'cus_${round}'`, [
        ORGS[0],
      ])
    })
    await addAppointments(store, ORGS[0], [
      { id: `apt_new_${round}`, start: new Date(T + round * 1_000).toISOString(), staffId: 'stf_3' },
    ])
  }

  it('every total and version it reads is exact, folded and pending', async () => {
    expect(await wrongReads(store)).toEqual([])
    await writeAFew(1)
    const [pending] = await store.admin((sql) =>
      sql.query<{ n: number }>('SELECT count(*)::int AS n FROM list_changes'),
    )
    expect(pending?.n).toBeGreaterThan(0)
    expect(await wrongReads(store)).toEqual([])
  })

  it("stays exact once lists.md's recipe, as printed, adds a `many` filter it does not know (service_id)", async () => {
    await store.admin((sql) => sql.exec(recipe()))
    const [lists] = await store.admin((sql) =>
      sql.query<{ n: number }>(
        "SELECT count(DISTINCT filters)::int AS n FROM buckets WHERE list = 'appointments' AND filters LIKE '%service_id%'",
      ),
    )
    expect(lists?.n).toBeGreaterThan(0)
    // Its lists are read along indexes: one for it alone and one with each combination of the others.
    expect(await listsWithoutIndex(store)).toEqual([])
    expect(await wrongReads(store)).toEqual([])
    await writeAFew(2)
    expect(await wrongReads(store)).toEqual([])
  })
})
