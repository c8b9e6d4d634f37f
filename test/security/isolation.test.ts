import type { FastifyInstance } from 'fastify'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { createPostgresStore } from '../../src/store/postgres.js'
import type { Store } from '../../src/store/types.js'
import { bearer, buildTestApp } from '../helpers/app.js'
import { createTestStore, postgresAvailable, STORE_KINDS, type TestStore } from '../helpers/stores.js'
import { STATUSES, seedTenants, type Tenant } from './tenants.js'

const READER = 'openbook_reader'

interface ListBody {
  data: Record<string, unknown>[]
  pagination: { total: number; hasMore: boolean }
}

/** Every documented filter, alone and combined, with ids of this and of the other organizations. */
function probesFor(tenants: readonly Tenant[]): string[] {
  const urls = ['/api/public/v1/customers?limit=100']
  for (const offset of [0, 1, 3]) urls.push(`/api/public/v1/customers?limit=100&offset=${offset}`)
  urls.push('/api/public/v1/customers?limit=1&offset=0', '/api/public/v1/customers?offset=null')
  const apt = '/api/public/v1/appointments?limit=100'
  urls.push(apt, `${apt}&offset=2`)
  for (const status of STATUSES) urls.push(`${apt}&status=${status}`)
  for (const tenant of tenants) {
    for (const customerId of tenant.customerIds) urls.push(`${apt}&customerId=${customerId}`)
    for (const staffId of tenant.staffIds) {
      urls.push(`${apt}&staffId=${staffId}`)
      urls.push(`${apt}&staffId=${staffId}&status=scheduled&customerId=${tenant.customerIds[0]}`)
    }
  }
  urls.push(`${apt}&startDate=2024-01-01T00:00:00Z`, `${apt}&endDate=2030-01-01T00:00:00Z`)
  urls.push(`${apt}&startDate=2024-06-01T00:00:00Z&endDate=2025-06-01T00:00:00Z&status=confirmed`)
  return urls
}

describe.each(STORE_KINDS)('tenant isolation in depth on %s', (kind) => {
  describe.skipIf(kind === 'postgres' && !postgresAvailable())('', () => {
    let testStore: TestStore
    let store: Store
    let tenants: Tenant[]
    let app: FastifyInstance
    let rlsOnlyApp: FastifyInstance

    beforeAll(async () => {
      testStore = await createTestStore(kind)
      store = testStore.store
      tenants = await seedTenants(store)
      ;({ app } = await buildTestApp(store, { logLevel: 'silent' }))
      ;({ app: rlsOnlyApp } = await buildTestApp(store, {
        logLevel: 'silent',
        tenantFilter: { omitAppTenantFilter: true },
      }))
    })

    afterAll(async () => {
      await app?.close()
      await rlsOnlyApp?.close()
      await testStore?.close()
    })

    it('row-level security is enabled and forced on every table that carries an organization id', async () => {
      const rows = await store.admin((sql) =>
        sql.query<{ table: string; enabled: boolean; forced: boolean }>(
          `SELECT c.relname AS table, c.relrowsecurity AS enabled, c.relforcerowsecurity AS forced
           FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace
           WHERE n.nspname = 'public' AND c.relkind IN ('r', 'p')
             AND (c.relname = 'organizations' OR EXISTS (
               SELECT 1 FROM pg_attribute a
               WHERE a.attrelid = c.oid AND a.attname = 'org_id' AND NOT a.attisdropped))
           ORDER BY 1`,
        ),
      )
      expect(rows.map((r) => r.table)).toEqual(
        expect.arrayContaining(['api_keys', 'appointments', 'customers', 'organizations', 'staff']),
      )
      for (const row of rows) expect(row, row.table).toMatchObject({ enabled: true, forced: true })
    })

    it.each([
      ['unset', ''],
      ['empty', "SELECT set_config('openbook.org_id', '', true);"],
    ])(
      'as openbook_reader with openbook.org_id %s every tenant table reads 0 rows',
      async (_label, setup) => {
        const counts = await store.admin(async (sql) => {
          await sql.exec(`SET LOCAL ROLE ${READER}; ${setup}`)
          const [row] = await sql.query<{ c: number; a: number; k: number }>(
            `SELECT (SELECT count(*)::int FROM customers) AS c, (SELECT count(*)::int FROM appointments) AS a,
                  (SELECT count(*)::int FROM api_keys) AS k`,
          )
          return row
        })
        expect(counts).toEqual({ c: 0, a: 0, k: 0 })
        // The control: the same role with the setting named sees that organization's rows only.
        const named = await store.admin(async (sql) => {
          await sql.exec(`SET LOCAL ROLE ${READER}`)
          await sql.query("SELECT set_config('openbook.org_id', $1, true)", [tenants[0]?.id])
          return sql.query<{ org_id: string }>('SELECT DISTINCT org_id FROM appointments')
        })
        expect(named).toEqual([{ org_id: tenants[0]?.id }])
      },
    )

    it.each([
      [
        'INSERT',
        "INSERT INTO customers (org_id, id, is_active, created_at, updated_at) VALUES ($1, 'x', true, now(), now())",
      ],
      ['UPDATE', "UPDATE customers SET first_name = 'x' WHERE org_id = $1"],
      ['DELETE', 'DELETE FROM customers WHERE org_id = $1'],
      ['UPDATE api_keys.name', "UPDATE api_keys SET name = 'x' WHERE org_id = $1"],
      ['DELETE api_keys', 'DELETE FROM api_keys WHERE org_id = $1'],
      ['INSERT appointments', "INSERT INTO appointments (org_id, id) VALUES ($1, 'x')"],
    ])('the reader role cannot %s (permission denied)', async (_label, statement) => {
      const attempt = store.asReader(async (sql) => {
        await sql.query("SELECT set_config('openbook.org_id', $1, true)", [tenants[0]?.id])
        return sql.query(statement, [tenants[0]?.id])
      })
      await expect(attempt).rejects.toThrow(/permission denied/)
    })

    it('the reader role may update api_keys.last_used_at of its own organization only', async () => {
      const [own, other] = await store.asReader(async (sql) => {
        await sql.query("SELECT set_config('openbook.org_id', $1, true)", [tenants[0]?.id])
        const a = await sql.query('UPDATE api_keys SET last_used_at = now() WHERE org_id = $1 RETURNING id', [
          tenants[0]?.id,
        ])
        const b = await sql.query('UPDATE api_keys SET last_used_at = now() WHERE org_id = $1 RETURNING id', [
          tenants[1]?.id,
        ])
        return [a.length, b.length]
      })
      expect(own).toBe(1)
      expect(other).toBe(0)
    })

    it('cross-tenant matrix: every endpoint x filter x key, with and without the app filter, 0 foreign rows', async () => {
      const idsOf = new Map(tenants.map((t) => [t.id, new Set(t.customerIds)]))
      const urls = probesFor(tenants)
      let probes = 0
      let foreign = 0
      let seen = 0
      const offenders: string[] = []
      for (const [label, instance] of [
        ['app', app],
        ['rls-only', rlsOnlyApp],
      ] as const) {
        for (const tenant of tenants) {
          for (const url of urls) {
            const response = await instance.inject({ method: 'GET', url, headers: bearer(tenant.key) })
            probes++
            expect(response.statusCode, url).toBe(200)
            const body = response.json<ListBody>()
            for (const row of body.data) {
              seen++
              const isForeign = url.includes('/customers')
                ? tenants.some((t) => t.id !== tenant.id && idsOf.get(t.id)?.has(String(row.id)))
                : row.orgId !== tenant.id
              if (isForeign) {
                foreign++
                offenders.push(`${label} ${tenant.id} ${url} -> ${String(row.id)}`)
              }
            }
            // Totals are counted under the same walls: a foreign filter value counts nothing.
            const foreignFilter = tenants.some(
              (t) =>
                t.id !== tenant.id &&
                [...t.customerIds, ...t.staffIds].some(
                  (id) => url.endsWith(`=${id}`) || url.includes(`=${id}&`),
                ),
            )
            if (foreignFilter) expect(body.pagination.total, `${label} ${tenant.id} ${url}`).toBe(0)
          }
        }
      }
      console.log(`[isolation ${kind}] probes ${probes}, rows checked ${seen}, foreign rows ${foreign}`)
      expect(offenders).toEqual([])
      expect(foreign).toBe(0)
      expect(seen).toBeGreaterThan(probes) // the matrix did read rows, so 0 foreign is meaningful
    })

    it('RLS alone (app filter omitted) returns each organization exactly its own active rows', async () => {
      for (const tenant of tenants) {
        const response = await rlsOnlyApp.inject({
          method: 'GET',
          url: '/api/public/v1/customers?limit=100',
          headers: bearer(tenant.key),
        })
        const ids = response.json<ListBody>().data.map((c) => String(c.id))
        expect(ids.sort()).toEqual(tenant.customerIds.filter((_, i) => i !== 1).sort())
      }
    })
  })
})

describe.skipIf(!postgresAvailable())('openbook_reader role on postgres', () => {
  let testStore: TestStore
  let store: Store

  beforeAll(async () => {
    testStore = await createTestStore('postgres')
    store = testStore.store
  })
  afterAll(async () => {
    await testStore?.close()
  })

  it('is not a superuser, does not bypass RLS, cannot log in or create', async () => {
    const [role] = await store.admin((sql) =>
      sql.query(
        `SELECT rolsuper, rolbypassrls, rolcreatedb, rolcreaterole, rolcanlogin, rolreplication
         FROM pg_roles WHERE rolname = $1`,
        [READER],
      ),
    )
    expect(role).toEqual({
      rolsuper: false,
      rolbypassrls: false,
      rolcreatedb: false,
      rolcreaterole: false,
      rolcanlogin: false,
      rolreplication: false,
    })
  })

  it('owns nothing in the database', async () => {
    const [owned] = await store.admin((sql) =>
      sql.query<{ n: number }>(
        `SELECT (SELECT count(*) FROM pg_class WHERE relowner = r.oid)
              + (SELECT count(*) FROM pg_namespace WHERE nspowner = r.oid)
              + (SELECT count(*) FROM pg_proc WHERE proowner = r.oid)
              + (SELECT count(*) FROM pg_type WHERE typowner = r.oid) AS n
         FROM pg_roles r WHERE r.rolname = $1`,
        [READER],
      ),
    )
    expect(Number(owned?.n)).toBe(0)
  })

  it('has exactly SELECT on customers, appointments, api_keys and UPDATE(last_used_at) on api_keys', async () => {
    const grants = await store.admin((sql) =>
      sql.query<{ t: string; p: string }>(
        `SELECT table_name AS t, privilege_type AS p FROM information_schema.role_table_grants
         WHERE grantee = $1 ORDER BY 1, 2`,
        [READER],
      ),
    )
    expect(grants).toEqual([
      { t: 'api_keys', p: 'SELECT' },
      { t: 'appointments', p: 'SELECT' },
      { t: 'customers', p: 'SELECT' },
    ])
    // Column grants beyond the table-wide SELECTs: only the last-used column is writable.
    const columns = await store.admin((sql) =>
      sql.query<{ t: string; c: string; p: string }>(
        `SELECT table_name AS t, column_name AS c, privilege_type AS p FROM information_schema.column_privileges
         WHERE grantee = $1 AND privilege_type <> 'SELECT' ORDER BY 1, 2, 3`,
        [READER],
      ),
    )
    expect(columns).toEqual([{ t: 'api_keys', c: 'last_used_at', p: 'UPDATE' }])
    // The same from the privilege functions, over every table and every privilege.
    const effective = await store.admin((sql) =>
      sql.query<{ t: string; p: string }>(
        `SELECT c.relname AS t, p AS p
         FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace,
              unnest(ARRAY['SELECT','INSERT','UPDATE','DELETE','TRUNCATE','REFERENCES','TRIGGER']) p
         WHERE n.nspname = 'public' AND c.relkind IN ('r', 'p', 'v', 'm', 'S')
           AND has_table_privilege($1, c.oid, p)
         ORDER BY 1, 2`,
        [READER],
      ),
    )
    expect(effective).toEqual([
      { t: 'api_keys', p: 'SELECT' },
      { t: 'appointments', p: 'SELECT' },
      { t: 'customers', p: 'SELECT' },
    ])
    const writableColumns = await store.admin((sql) =>
      sql.query<{ t: string; c: string }>(
        `SELECT c.relname AS t, a.attname AS c
         FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace
         JOIN pg_attribute a ON a.attrelid = c.oid AND a.attnum > 0 AND NOT a.attisdropped
         WHERE n.nspname = 'public' AND c.relkind = 'r'
           AND (has_column_privilege($1, c.oid, a.attnum, 'UPDATE')
             OR has_column_privilege($1, c.oid, a.attnum, 'INSERT'))
         ORDER BY 1, 2`,
        [READER],
      ),
    )
    expect(writableColumns).toEqual([{ t: 'api_keys', c: 'last_used_at' }])
  })
})

describe.skipIf(!postgresAvailable())(
  'one pooled connection shared by two organizations (PgBouncer style)',
  () => {
    let testStore: TestStore
    let single: Store
    let app: FastifyInstance
    let tenants: Tenant[]

    beforeAll(async () => {
      testStore = await createTestStore('postgres')
      tenants = await seedTenants(testStore.store, ['org_p1', 'org_p2'])
      single = createPostgresStore({ connectionString: testStore.url as string, maxConnections: 1 })
      ;({ app } = await buildTestApp(single, {
        logLevel: 'silent',
        lastUsed: { resolutionMs: 0, flushEveryMs: 1 },
      }))
    })
    afterAll(async () => {
      await app?.close()
      await single?.close()
      await testStore?.close()
    })

    it('alternating requests see only their own rows and leave no organization on the connection', async () => {
      const pids = new Set<number>()
      let requests = 0
      for (let round = 0; round < 10; round++) {
        for (const tenant of tenants) {
          const url =
            round % 2 === 0 ? '/api/public/v1/appointments?limit=100' : '/api/public/v1/customers?limit=100'
          const response = await app.inject({ method: 'GET', url, headers: bearer(tenant.key) })
          requests++
          expect(response.statusCode).toBe(200)
          const rows = response.json<ListBody>().data
          expect(rows.length).toBeGreaterThan(0)
          for (const row of rows) {
            if (url.includes('appointments')) expect(row.orgId).toBe(tenant.id)
            else expect(tenant.customerIds).toContain(row.id)
          }
          const [after] = await single.admin((sql) =>
            sql.query<{ org: string | null; hash: string | null; role: string; pid: number }>(
              `SELECT current_setting('openbook.org_id', true) AS org,
                    current_setting('openbook.key_hash', true) AS hash,
                    current_role AS role, pg_backend_pid() AS pid`,
            ),
          )
          pids.add(after?.pid ?? -1)
          expect(after?.org ?? '').toBe('')
          expect(after?.hash ?? '').toBe('')
          expect(after?.role).not.toBe(READER)
        }
      }
      expect(requests).toBe(20)
      expect(pids.size).toBe(1)
    })
  },
)
