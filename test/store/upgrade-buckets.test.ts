import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { patience } from '../../packages/client/test/helpers/patience.js'
import { appointmentsPage } from '../../src/queries/appointments.js'
import { createPostgresStore } from '../../src/store/postgres/postgres.js'
import { LATEST_VERSION, migrate } from '../../src/store/schema/migrate.js'
import type { Store } from '../../src/store/types.js'
import { bucketFaults } from '../helpers/buckets.js'
import { addAppointments, addStaff, createOrg } from '../helpers/fixtures.js'
import { migrateTo } from '../helpers/migrate-to.js'
import { fetchPage } from '../helpers/pages.js'
import { createTestDatabase, postgresAvailable, type TestDatabase } from '../helpers/stores.js'

// Migrations 012 and 013 over appointments stored before them: a database at version 11 (009's
// lists only) with a busy staff member (past a bucket's 2,000 entries), a quiet one and
// appointments of nobody, migrated to the latest version. The buckets it rebuilds must be exact
// and split, and its triggers must keep them exact for the writes after it.

const ORG = 'org_upgrade'
const STATUSES = ['completed', 'scheduled', 'no_show', 'cancelled'] as const
const T = Date.parse('2025-01-01T09:00:00.000Z')

const appointments = (from: number, count: number) =>
  Array.from({ length: count }, (_, k) => {
    const i = from + k
    const staffId = i % 9 === 4 ? undefined : i % 4 === 1 ? 'stf_quiet' : 'stf_busy'
    return {
      id: `apt_${String(i).padStart(5, '0')}`,
      // A third on one instant, the rest an hour apart.
      start: new Date(i % 3 === 0 ? T : T - i * 3_600_000).toISOString(),
      status: STATUSES[i % STATUSES.length] ?? 'completed',
      isActive: i % 13 !== 7,
      ...(staffId ? { staffId } : {}),
    }
  })

describe.skipIf(!postgresAvailable())('migrations 012 to 014 over appointments stored at version 11', () => {
  let database: TestDatabase
  let store: Store
  beforeAll(async () => {
    database = await createTestDatabase()
    store = createPostgresStore({ connectionString: database.url, maxConnections: 2 })
    await migrateTo(store, 11)
    await createOrg(store, ORG)
    await addStaff(store, ORG, ['stf_busy', 'stf_quiet'])
    await addAppointments(store, ORG, appointments(0, 6_000))
  }, patience(120_000))
  afterAll(async () => {
    await store?.close()
    await database?.drop()
  })

  async function total(filters: Record<string, string>): Promise<number> {
    const page = await store.read(async (sql) => {
      await sql.query("SELECT set_config('openbook.org_id', $1, true)", [ORG])
      return fetchPage({ pageForm: 'rows' }, sql, appointmentsPage(ORG, filters), { limit: 1, offset: 0 })
    })
    return page.pagination.total
  }

  async function counted(condition: string): Promise<number> {
    const [row] = await store.admin((sql) =>
      sql.query<{ n: number }>(
        `SELECT count(*)::int AS n FROM appointments WHERE org_id = $1 AND is_active AND ${condition}`,
        [ORG],
      ),
    )
    return row?.n ?? -1
  }

  it('fills the staff lists exactly, split into buckets of at most 2,000, and keeps them through later writes', async () => {
    const result = await migrate(store)
    expect(result.version).toBe(LATEST_VERSION)
    expect(result.applied).toContain('012_staff_bucket_lists.sql')
    expect(await bucketFaults(store)).toEqual([])
    const [lists] = await store.admin((sql) =>
      sql.query<{ buckets: number }>(
        `SELECT count(*)::int AS buckets FROM buckets
         WHERE org_id = $1 AND list = 'appointments' AND filters = '{"staff_id": "stf_busy"}'`,
        [ORG],
      ),
    )
    expect(lists?.buckets).toBeGreaterThan(1)
    for (const [filters, condition] of [
      [{ staffId: 'stf_busy' }, "staff_id = 'stf_busy'"],
      [{ staffId: 'stf_quiet', status: 'no_show' }, "staff_id = 'stf_quiet' AND status = 'no_show'"],
      [{ staffId: 'stf_busy', status: 'completed' }, "staff_id = 'stf_busy' AND status = 'completed'"],
    ] as const)
      expect(await total(filters), condition).toBe(await counted(condition))

    await addAppointments(store, ORG, appointments(6_000, 2_500))
    await store.admin((sql) =>
      sql.query(
        "UPDATE appointments SET staff_id = 'stf_quiet' WHERE org_id = $1 AND staff_id = 'stf_busy' AND id < 'apt_01000'",
        [ORG],
      ),
    )
    expect(await bucketFaults(store)).toEqual([])
    expect(await total({ staffId: 'stf_quiet' })).toBe(await counted("staff_id = 'stf_quiet'"))
  })
})
