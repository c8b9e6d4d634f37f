import type { FastifyInstance } from 'fastify'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import {
  APPOINTMENT_FILTERS,
  type AppointmentFilters,
  appointmentsPage,
} from '../../src/queries/appointments.js'
import { customersPage } from '../../src/queries/customers.js'
import { type PageStatement, rowsTextFor } from '../../src/queries/page-statement.js'
import { tenantCondition } from '../../src/queries/sql.js'
import { APPOINTMENT_LIST, type FilterDescription, filterValues } from '../../src/schemas/filters.js'
import { connectingRole } from '../../src/store/open.js'
import { createPostgresStore } from '../../src/store/postgres/postgres.js'
import type { RowSink, Sql, Store } from '../../src/store/types.js'
import { bearer, buildTestApp } from '../helpers/app.js'
import { fetchPage } from '../helpers/pages.js'
import { MIGRATED_READER_PRIVILEGES } from '../helpers/reader-grants.js'
import {
  createTestRole,
  createTestStore,
  describeEachStore,
  postgresAvailable,
  type TestRole,
  type TestStore,
} from '../helpers/stores.js'
import { seedTenants, type Tenant } from './tenants.js'

const READER = 'openbook_reader'

interface ListBody {
  data: Record<string, unknown>[]
  pagination: { total: number; hasMore: boolean }
}

/** A date-time each bound filter is probed with: one that selects rows of the tenants' two years. */
const BOUND_VALUES = { from: '2024-01-01T00:00:00Z', to: '2030-01-01T00:00:00Z' } as const

/** The values an appointments filter is probed with for `tenant`: its enumeration, the tenant's ids, or a date-time. */
function probeValues(filter: FilterDescription, tenant: Tenant): readonly string[] {
  if (filter.compare !== 'equals') return [BOUND_VALUES[filter.compare]]
  const values = filterValues(APPOINTMENT_LIST, filter) ?? tenant.filterIds[filter.param]
  if (!values?.length)
    throw new Error(
      `test/security/tenants.ts seeds no ids for the filter ${filter.param}: add its rows and its ids to filterIds`,
    )
  return values
}

/** Every filter of the descriptions, alone and all combined, with ids of this and of the other organizations. */
function probesFor(tenants: readonly Tenant[]): string[] {
  const urls = ['/api/public/v1/customers?limit=100']
  for (const offset of [0, 1, 3]) urls.push(`/api/public/v1/customers?limit=100&offset=${offset}`)
  urls.push('/api/public/v1/customers?limit=1&offset=0', '/api/public/v1/customers?offset=null')
  const apt = '/api/public/v1/appointments?limit=100'
  urls.push(apt, `${apt}&offset=2`)
  // An enumeration's and a bound's values are the same for every tenant: probed once; an id
  // filter with each tenant's ids.
  const [first] = tenants
  const shared = (filter: FilterDescription) =>
    filter.compare !== 'equals' || filterValues(APPOINTMENT_LIST, filter) !== undefined
  for (const filter of APPOINTMENT_LIST.filters.filter(shared))
    if (first) for (const value of probeValues(filter, first)) urls.push(`${apt}&${filter.param}=${value}`)
  for (const tenant of tenants) {
    for (const filter of APPOINTMENT_LIST.filters.filter((filter) => !shared(filter)))
      for (const value of probeValues(filter, tenant)) urls.push(`${apt}&${filter.param}=${value}`)
    // Every filter at once, with each of the tenant's first two ids.
    for (const nth of [0, 1]) {
      const all = APPOINTMENT_LIST.filters.map((filter) => {
        const values = probeValues(filter, tenant)
        return `${filter.param}=${values[nth % values.length]}`
      })
      urls.push(`${apt}&${all.join('&')}`)
    }
  }
  return urls
}

/**
 * Test-only: the store with the application's own tenant condition (`tenantCondition` of
 * queries/sql.ts) taken out of every statement the request path sends, so that row-level
 * security is the only wall left. `removed` counts the conditions taken out: a test checks it
 * grew, so that a change in the condition's text cannot leave this wrapper removing nothing.
 */
function withoutAppTenantFilter(store: Store, removed: { count: number }): Store {
  const text = tenantCondition('ALIAS')
    .replace(/[.*+?^${}()|[\]\\]/g, '\\$&')
    .replace('ALIAS', '\\w+')
  const condition = new RegExp(text, 'g')
  const strip = (statement: string) =>
    statement.replace(condition, () => {
      removed.count++
      return '$1::text IS NOT NULL'
    })
  const wrap = (sql: Sql): Sql => {
    const into = sql.queryInto
    return {
      ...sql,
      query: (statement, params) => sql.query(strip(statement), params),
      exec: (statement) => sql.exec(strip(statement)),
      ...(into ? { queryInto: (sink, statement, params) => into(sink, strip(statement), params) } : {}),
    }
  }
  return {
    ...store,
    read: (work) => store.read((sql) => work(wrap(sql))),
    asReader: (work) => store.asReader((sql) => work(wrap(sql))),
  }
}

/** One page statement per filter of the query layer, and all of them at once, with `tenant`'s values. */
function statementsFor(orgId: string, tenant: Tenant): [string, PageStatement][] {
  const values = Object.fromEntries(
    APPOINTMENT_LIST.filters.map((filter) => [filter.param, probeValues(filter, tenant)[0]]),
  ) as Required<AppointmentFilters>
  return [
    ['customers', customersPage(orgId)],
    ['appointments', appointmentsPage(orgId, {})],
    ...APPOINTMENT_FILTERS.map((name): [string, PageStatement] => [
      `appointments by ${name}`,
      appointmentsPage(orgId, { [name]: values[name] }),
    ]),
    ['appointments by every filter', appointmentsPage(orgId, values)],
  ]
}

describeEachStore('tenant isolation in depth on %s', (testStore) => {
  const { kind } = testStore
  let store: Store
  let tenants: Tenant[]
  let app: FastifyInstance
  let rlsOnlyApp: FastifyInstance
  let appFilterOnlyApp: FastifyInstance
  let noWallsApp: FastifyInstance
  let bypass: Store
  const removedFilters = { count: 0 }

  beforeAll(async () => {
    store = testStore.store
    tenants = await seedTenants(store)
    // Test-only: the request path on the connecting (superuser) role, where row-level security
    // does not apply, so that the application's own filter is the only wall left.
    bypass = { ...store, read: (work) => store.admin(work), asReader: (work) => store.admin(work) }
    ;({ app } = await buildTestApp(store, { logLevel: 'silent' }))
    ;({ app: rlsOnlyApp } = await buildTestApp(withoutAppTenantFilter(store, removedFilters), {
      logLevel: 'silent',
    }))
    ;({ app: appFilterOnlyApp } = await buildTestApp(bypass, { logLevel: 'silent' }))
    ;({ app: noWallsApp } = await buildTestApp(withoutAppTenantFilter(bypass, removedFilters), {
      logLevel: 'silent',
    }))
  })

  afterAll(async () => {
    for (const instance of [app, rlsOnlyApp, appFilterOnlyApp, noWallsApp]) await instance?.close()
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
      expect.arrayContaining([
        'api_keys',
        'appointments',
        'buckets',
        'customers',
        'list_changes',
        'list_folds',
        'organizations',
        'staff',
      ]),
    )
    for (const row of rows) expect(row, row.table).toMatchObject({ enabled: true, forced: true })
  })

  it.each([
    ['unset', ''],
    ['empty', "SELECT set_config('openbook.org_id', '', true);"],
  ])('as openbook_reader with openbook.org_id %s every tenant table reads 0 rows', async (_label, setup) => {
    const counts = await store.admin(async (sql) => {
      await sql.exec(`SET LOCAL ROLE ${READER}; ${setup}`)
      const [row] = await sql.query<{
        c: number
        a: number
        o: number
        d: number
        n: number
        e: number
        b: number
        v: number
        x: number
        k: number
      }>(
        `SELECT (SELECT count(*)::int FROM customers) AS c, (SELECT count(*)::int FROM appointments) AS a,
                  (SELECT count(*)::int FROM appointment_counts) AS o,
                  (SELECT count(*)::int FROM appointment_day_counts) AS d,
                  (SELECT count(*)::int FROM customer_counts) AS n,
                  (SELECT count(*)::int FROM customer_day_counts) AS e,
                  (SELECT count(*)::int FROM list_buckets) AS b, (SELECT count(*)::int FROM list_versions) AS v,
                  (SELECT count(*)::int FROM buckets) + (SELECT count(*)::int FROM list_changes)
                    + (SELECT count(*)::int FROM list_folds) AS x,
                  (SELECT count(*)::int FROM api_keys) AS k`,
      )
      return row
    })
    expect(counts).toEqual({ c: 0, a: 0, o: 0, d: 0, n: 0, e: 0, b: 0, v: 0, x: 0, k: 0 })
    // The control: the same role with the setting named sees that organization's rows only.
    const named = await store.admin(async (sql) => {
      await sql.exec(`SET LOCAL ROLE ${READER}`)
      await sql.query("SELECT set_config('openbook.org_id', $1, true)", [tenants[0]?.id])
      return sql.query<{ org_id: string }>('SELECT DISTINCT org_id FROM appointments')
    })
    expect(named).toEqual([{ org_id: tenants[0]?.id }])
  })

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

  /** Runs every probe with every organization's key; counts foreign rows and foreign totals. */
  async function matrix(instance: FastifyInstance, label: string) {
    const idsOf = new Map(tenants.map((t) => [t.id, new Set(t.customerIds)]))
    const urls = probesFor(tenants)
    const result = { probes: 0, foreign: 0, seen: 0, offenders: [] as string[] }
    for (const tenant of tenants) {
      for (const url of urls) {
        const response = await instance.inject({ method: 'GET', url, headers: bearer(tenant.key) })
        result.probes++
        expect(response.statusCode, url).toBe(200)
        const body = response.json<ListBody>()
        for (const row of body.data) {
          result.seen++
          const isForeign = url.includes('/customers')
            ? tenants.some((t) => t.id !== tenant.id && idsOf.get(t.id)?.has(String(row.id)))
            : row.orgId !== tenant.id
          if (isForeign) {
            result.foreign++
            result.offenders.push(`${label} ${tenant.id} ${url} -> ${String(row.id)}`)
          }
        }
        // Totals are counted under the same walls: a foreign filter value counts nothing.
        const foreignFilter = tenants.some(
          (t) =>
            t.id !== tenant.id &&
            Object.values(t.filterIds)
              .flat()
              .some((id) => url.endsWith(`=${id}`) || url.includes(`=${id}&`)),
        )
        if (foreignFilter && body.pagination.total !== 0) {
          result.foreign++
          result.offenders.push(`${label} ${tenant.id} ${url} -> total ${body.pagination.total}`)
        }
      }
    }
    return result
  }

  it('cross-tenant matrix: every endpoint x filter x key, both walls, RLS alone, app filter alone: 0 foreign rows', async () => {
    // The control: with both walls removed the same matrix does find foreign rows, so it can fail.
    const [everything] = await bypass.read((sql) =>
      sql.query<{ orgs: number }>('SELECT count(DISTINCT org_id)::int AS orgs FROM customers'),
    )
    expect(everything?.orgs).toBe(3) // the bypass store really is outside row-level security
    const control = await matrix(noWallsApp, 'no walls')
    expect(control.foreign).toBeGreaterThan(0)
    expect(removedFilters.count).toBeGreaterThan(0)

    let probes = 0
    let foreign = 0
    let seen = 0
    const offenders: string[] = []
    const layers: string[] = []
    for (const [label, instance] of [
      ['both walls', app],
      ['RLS alone', rlsOnlyApp],
      ['app filter alone', appFilterOnlyApp],
    ] as const) {
      const result = await matrix(instance, label)
      probes += result.probes
      foreign += result.foreign
      seen += result.seen
      offenders.push(...result.offenders)
      layers.push(`${label} ${result.probes}/${result.foreign}`)
    }
    console.log(
      `[isolation ${kind}] probes ${probes}, foreign rows ${foreign} (rows checked ${seen}; ` +
        `probes/foreign per layer: ${layers.join(', ')}; control without walls: ${control.foreign} foreign)`,
    )
    expect(offenders).toEqual([])
    expect(foreign).toBe(0)
    expect(seen).toBeGreaterThan(probes) // the matrix did read rows, so 0 foreign is meaningful
  })

  it('row-level security alone: a transaction set to one organization reads none of the rows the queries ask of another', async () => {
    const page = { limit: 100, offset: 0 }
    const read = (setTo: string, statement: PageStatement) =>
      store.read(async (sql) => {
        await sql.query("SELECT set_config('openbook.org_id', $1, true)", [setTo])
        return fetchPage(store.adapter, sql, statement, page)
      })
    let checked = 0
    for (const target of tenants) {
      // A first page runs its statement without the seek; the whole one runs for deeper pages.
      const forms = statementsFor(target.id, target).flatMap(([label, statement]) => [
        [label, statement] as const,
        [`${label}, whole statement`, { ...statement, nearRowsText: statement.rowsText }] as const,
      ])
      for (const [label, statement] of forms) {
        // The control: set to the organization asked for, the same statement finds its rows.
        const own = await read(target.id, statement)
        expect(own.pagination.total, `${target.id} ${label}`).toBeGreaterThan(0)
        expect(own.items.length, `${target.id} ${label}`).toBeGreaterThan(0)
        for (const reader of tenants.filter((t) => t !== target)) {
          const other = await read(reader.id, statement)
          expect(
            { items: String(other.items), pagination: other.pagination },
            `set to ${reader.id}, ${label} of ${target.id}`,
          ).toEqual({ items: '', pagination: { ...page, total: 0, hasMore: false } })
          checked++
        }
      }
    }
    expect(checked).toBeGreaterThanOrEqual(tenants.length * (tenants.length - 1) * 6)
  })

  it('RLS alone (app filter removed) returns each organization exactly its own active rows', async () => {
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

interface Probe {
  readonly path: 'read' | 'asReader'
  readonly query: string
  readonly role: string
  readonly timeout: string
  readonly readOnly: string
  readonly org: string
  readonly hash: string
}

/** The session state a statement runs under, read in its own transaction just before it. */
const STATE_SQL = `SELECT current_user AS role, current_setting('statement_timeout') AS timeout,
  current_setting('transaction_read_only') AS "readOnly",
  coalesce(current_setting('openbook.org_id', true), '') AS org,
  coalesce(current_setting('openbook.key_hash', true), '') AS hash`

/**
 * A store that records, before every statement the app sends on the request path, the role, the
 * statement time-out, read-only mode and the tenant settings in force; and counts admin use.
 */
function probing(store: Store, probes: Probe[], adminUse: { count: number }): Store {
  const wrap = (sql: Sql, path: Probe['path']): Sql => {
    const into = sql.queryInto
    const record = async (query: string) => {
      const [state] = await sql.query<Omit<Probe, 'path' | 'query'>>(STATE_SQL)
      if (state) probes.push({ path, query, ...state })
    }
    return {
      async query<Row extends object>(text: string, params?: readonly unknown[]) {
        await record(text)
        return sql.query<Row>(text, params)
      },
      async exec(text: string) {
        await record(text)
        return sql.exec(text)
      },
      // The page as production reads it: its rows' bytes where the store hands them on.
      ...(into
        ? {
            async queryInto(sink: RowSink, text: string, params?: readonly unknown[]) {
              await record(text)
              return into(sink, text, params)
            },
          }
        : {}),
    }
  }
  return {
    kind: store.kind,
    adapter: store.adapter,
    concurrentReads: store.concurrentReads,
    read: (work) => store.read((sql) => work(wrap(sql, 'read'))),
    asReader: (work) => store.asReader((sql) => work(wrap(sql, 'asReader'))),
    admin: (work) => {
      adminUse.count++
      return store.admin(work)
    },
    pools: () => store.pools(),
    maintain: (statement) => store.maintain(statement),
    close: () => store.close(),
  }
}

describeEachStore('every statement of the request path on %s', (testStore) => {
  const { kind } = testStore
  let tenants: Tenant[]

  beforeAll(async () => {
    tenants = await seedTenants(testStore.store, ['org_s1', 'org_s2'])
  })

  it("runs as openbook_reader, under the 5 s statement time-out, read-only, with only the key's organization set", async () => {
    const probes: Probe[] = []
    const adminUse = { count: 0 }
    const store = probing(testStore.store, probes, adminUse)
    const { app } = await buildTestApp(store, {
      logLevel: 'silent',
      lastUsed: { resolutionMs: 0, flushEveryMs: 3_600_000 },
    })
    const [own, other] = tenants as [Tenant, Tenant]
    const statuses: number[] = []
    for (const url of [
      '/api/public/v1/customers?limit=3',
      '/api/public/v1/customers?offset=1000', // an empty page: the count runs alone
      `/api/public/v1/appointments?status=scheduled&customerId=${own.customerIds[0]}&staffId=${own.staffIds[0]}` +
        '&startDate=2024-01-01T00:00:00Z&endDate=2026-01-01T00:00:00Z',
      `/api/public/v1/appointments?customerId=${other.customerIds[0]}`,
      '/api/public/v1/appointments?limit=1000', // 400, after the key was checked
    ]) {
      statuses.push((await app.inject({ method: 'GET', url, headers: bearer(own.key) })).statusCode)
    }
    const unknown = await app.inject({
      method: 'GET',
      url: '/api/public/v1/customers',
      headers: bearer(`svc_test_${'e'.repeat(64)}`),
    })
    statuses.push(unknown.statusCode)
    await app.close() // flushes the last-used batch: the request path's only write
    expect(statuses).toEqual([200, 200, 200, 200, 400, 401])
    expect(adminUse.count).toBe(0)

    const reads = probes.filter((p) => p.path === 'read')
    const writes = probes.filter((p) => p.path === 'asReader')
    expect(reads.length).toBeGreaterThanOrEqual(10)
    expect(writes.length).toBeGreaterThan(0)
    for (const probe of probes) {
      const label = `${probe.path}: ${probe.query.slice(0, 80)}`
      expect(probe.role, label).toBe(READER)
      expect(probe.timeout, label).toBe('5s')
      expect(probe.readOnly, label).toBe(probe.path === 'read' ? 'on' : 'off')
    }
    // Authentication runs with no organization named; every later statement with the key's own,
    // and the presented key's hash is no longer in force once the organization is known.
    const auth = reads.filter((p) => p.query.includes('openbook_key_lookup'))
    expect(auth).toHaveLength(6)
    for (const probe of auth) expect({ org: probe.org, hash: probe.hash }).toEqual({ org: '', hash: '' })
    for (const probe of reads.filter((p) => !p.query.includes('openbook_key_lookup')))
      expect({ org: probe.org, hash: probe.hash }, probe.query.slice(0, 80)).toEqual({
        org: own.id,
        hash: '',
      })
    // The wrapper hands on its store's adapter and the page's reading, so the pages probed here are
    // read as production reads them on this store: as rows, from their bytes.
    const customers = customersPage(own.id)
    expect(testStore.store.adapter.pageForm).toBe('rows')
    expect(reads.map((p) => p.query)).toContain(rowsTextFor(customers, { offset: 0 }))
    expect(reads.map((p) => p.query)).toContain(customers.rowsText)
    const updates = writes.filter((p) => p.query.startsWith('UPDATE'))
    expect(updates.length).toBeGreaterThan(0)
    for (const probe of updates) expect(probe.org).toBe(own.id)
    console.log(
      `[isolation ${kind}] request path: ${reads.length} reads and ${writes.length} last-used statements, ` +
        `all as ${READER}, statement_timeout 5s; 0 admin transactions`,
    )
  })
})

describeEachStore('openbook_reader role on %s', (testStore) => {
  let store: Store

  beforeAll(() => {
    store = testStore.store
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

  /** The reader's table privileges, as information_schema and has_table_privilege both must list them. */
  const READER_TABLE_GRANTS = MIGRATED_READER_PRIVILEGES.filter((p) => p.kind === 'table')
    .map((p) => ({ t: p.object, p: p.privilege }))
    .sort((x, y) => (x.t === y.t ? x.p.localeCompare(y.p) : x.t < y.t ? -1 : 1))
  const READER_COLUMN_GRANTS = MIGRATED_READER_PRIVILEGES.filter((p) => p.kind === 'column').map((p) => {
    const [t = '', c = ''] = p.object.split('.')
    return { t, c, p: p.privilege }
  })

  it('has exactly SELECT on customers, appointments, their counts, api_keys and UPDATE(last_used_at) on api_keys', async () => {
    const grants = await store.admin((sql) =>
      sql.query<{ t: string; p: string }>(
        `SELECT table_name AS t, privilege_type AS p FROM information_schema.role_table_grants
         WHERE grantee = $1 ORDER BY 1, 2`,
        [READER],
      ),
    )
    expect(grants).toEqual(READER_TABLE_GRANTS)
    // Column grants beyond the table-wide SELECTs: only the last-used column is writable.
    const columns = await store.admin((sql) =>
      sql.query<{ t: string; c: string; p: string }>(
        `SELECT table_name AS t, column_name AS c, privilege_type AS p FROM information_schema.column_privileges
         WHERE grantee = $1 AND privilege_type <> 'SELECT' ORDER BY 1, 2, 3`,
        [READER],
      ),
    )
    expect(columns).toEqual(READER_COLUMN_GRANTS)
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
    expect(effective).toEqual(READER_TABLE_GRANTS)
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
    expect(writableColumns).toEqual(READER_COLUMN_GRANTS.map(({ t, c }) => ({ t, c })))
  })

  it('may call exactly the key lookup, the schema version, openbook_prepare and the background fold of the functions in public', async () => {
    // Trigger functions are left out: they cannot be called, only fired by the tables' writes.
    const callable = await store.admin((sql) =>
      sql.query<{ f: string }>(
        `SELECT p.oid::regprocedure::text AS f
         FROM pg_proc p JOIN pg_namespace n ON n.oid = p.pronamespace
         WHERE n.nspname = 'public' AND p.prorettype <> 'trigger'::regtype
           AND has_function_privilege($1, p.oid, 'EXECUTE')
         ORDER BY 1`,
        [READER],
      ),
    )
    expect(callable.map((row) => row.f)).toEqual(
      MIGRATED_READER_PRIVILEGES.filter((p) => p.kind === 'function').map((p) => p.object),
    )
    // The list the server checks holds what the request path needs, named here too, and what the
    // earlier release that serves this schema calls.
    expect(callable.map((row) => row.f)).toEqual([
      'list_filter_sets(jsonb)',
      'list_fold_pending()',
      'openbook_authenticate(text)',
      'openbook_key_lookup(text)',
      'openbook_prepare(text,text,boolean)',
      'openbook_schema_version()',
    ])
  })

  it('is a member of no other role, and may call exactly one SECURITY DEFINER function: the parameterless background fold', async () => {
    const [row] = await store.admin((sql) =>
      sql.query<{ memberships: number; definers: string[]; callable: string[]; create: boolean }>(
        `SELECT (SELECT count(*)::int FROM pg_auth_members m JOIN pg_roles r ON r.oid = m.member
                 WHERE r.rolname = $1) AS memberships,
                (SELECT array_agg(p.oid::regprocedure::text ORDER BY p.oid::regprocedure::text COLLATE "C") FROM pg_proc p
                 JOIN pg_namespace n ON n.oid = p.pronamespace
                 WHERE n.nspname = 'public' AND p.prosecdef) AS definers,
                (SELECT coalesce(array_agg(p.oid::regprocedure::text ORDER BY p.oid::regprocedure::text COLLATE "C"), '{}') FROM pg_proc p
                 JOIN pg_namespace n ON n.oid = p.pronamespace
                 WHERE n.nspname = 'public' AND p.prosecdef AND has_function_privilege($1, p.oid, 'EXECUTE')) AS callable,
                has_schema_privilege($1, 'public', 'CREATE') AS create`,
        [READER],
      ),
    )
    // A membership would lend it another role's rights and policies; a definer function runs with
    // its owner's; CREATE in public would let it plant objects. Two definer functions fold the
    // lists' pending changes: list_fold for writers, which the reader may not call, and
    // list_fold_pending, named here as the one it may (an allow-list: a new definer function it
    // could call fails this test).
    expect(row).toEqual({
      memberships: 0,
      definers: ['list_fold(text,text,boolean,integer)', 'list_fold_pending()'],
      callable: ['list_fold_pending()'],
      create: false,
    })
    // It takes no argument, is the schema owner's (the tables' owner), and fixes its search_path.
    const [fold] = await store.admin((sql) =>
      sql.query<{ args: number; owner_owns_tables: boolean; config: string[] }>(
        `SELECT p.pronargs::int AS args, p.proowner = (SELECT relowner FROM pg_class WHERE oid = 'list_changes'::regclass) AS owner_owns_tables,
                p.proconfig AS config
         FROM pg_proc p WHERE p.oid = 'list_fold_pending()'::regprocedure`,
      ),
    )
    expect(fold).toMatchObject({ args: 0, owner_owns_tables: true })
    expect(fold?.config).toContain('search_path=pg_catalog, public')
  })

  describe('the background fold, the one definer function it may call', () => {
    const ORG = 'org_fold_rights'
    /** Pending changes of the organization's customers, and their list's version. */
    const state = () =>
      store.admin(async (sql) => {
        const [row] = await sql.query<{ pending: number; version: number }>(
          `SELECT (SELECT count(*)::int FROM list_changes WHERE org_id = $1) AS pending,
                  ((SELECT coalesce(sum(changes), 0) FROM list_folds WHERE org_id = $1)
                   + (SELECT count(*) FROM list_changes WHERE org_id = $1))::int AS version`,
          [ORG],
        )
        return row
      })

    beforeAll(async () => {
      await store.admin(async (sql) => {
        await sql.query(`INSERT INTO organizations (id, name, plan) VALUES ($1, $1, 'free')`, [ORG])
        await sql.query(
          `INSERT INTO customers (org_id, id, is_active, created_at, updated_at)
           SELECT $1, 'cus_' || g, true, timestamptz '2025-01-01' + g * interval '1 hour', now()
           FROM generate_series(1, 400) g`,
          [ORG],
        )
        await sql.query('SELECT list_fold_all()')
      })
      // 300 one-row writes that no commit folds (REPEATABLE READ): pending, above the threshold.
      await store.admin(async (sql) => {
        await sql.exec('SET TRANSACTION ISOLATION LEVEL REPEATABLE READ')
        for (let i = 1; i <= 300; i++)
          await sql.query(`UPDATE customers SET first_name = 'n' WHERE org_id = $1 AND id = $2`, [
            ORG,
            `cus_${i}`,
          ])
      })
      expect((await state())?.pending).toBe(300)
    })

    it("folds nothing from the request path's read-only transaction", async () => {
      await expect(store.read((sql) => sql.query('SELECT * FROM list_fold_pending()'))).rejects.toThrow(
        /read-write transaction only/,
      )
      expect((await state())?.pending).toBe(300)
    })

    it('folds nothing outside READ COMMITTED', async () => {
      await expect(
        store.admin(async (sql) => {
          await sql.exec('SET TRANSACTION ISOLATION LEVEL REPEATABLE READ')
          return sql.query('SELECT * FROM list_fold_pending()')
        }),
      ).rejects.toThrow(/READ COMMITTED only/)
      expect((await state())?.pending).toBe(300)
    })

    it('folds as the reader in a read-write transaction, changing no version, and leaves the reader unable to write any table', async () => {
      const before = await state()
      const [report] = await store.asReader((sql) =>
        sql.query<{ folded: number }>('SELECT * FROM list_fold_pending()'),
      )
      expect(report?.folded).toBeGreaterThanOrEqual(1)
      expect(await state()).toEqual({ pending: 0, version: before?.version })
      for (const statement of [
        `INSERT INTO list_changes (org_id, list, at, id, attrs, delta) VALUES ('${ORG}', 'customers', now(), 'x', '{}', 1)`,
        `DELETE FROM list_changes WHERE org_id = '${ORG}'`,
        `UPDATE buckets SET n = n + 1 WHERE org_id = '${ORG}'`,
        `UPDATE list_folds SET changes = 0 WHERE org_id = '${ORG}'`,
        `UPDATE customers SET first_name = 'x' WHERE org_id = '${ORG}'`,
        `DELETE FROM appointments WHERE org_id = '${ORG}'`,
        `INSERT INTO organizations (id, name, plan) VALUES ('org_x', 'x', 'free')`,
        `SELECT list_fold('${ORG}', 'customers', false, 5000)`,
      ]) {
        await expect(
          store.asReader(async (sql) => {
            await sql.query("SELECT set_config('openbook.org_id', $1, true)", [ORG])
            return sql.query(statement)
          }),
          statement,
        ).rejects.toThrow(/permission denied/)
      }
    })
  })

  it('the only policies that apply to it are the tenant policy of each table and the key lookup', async () => {
    const policies = await store.admin((sql) =>
      sql.query<{ table: string; policy: string; command: string; roles: string; using: string }>(
        `SELECT tablename AS table, policyname AS policy, cmd AS command,
                array_to_string(roles, ',') AS roles, qual AS using
         FROM pg_policies WHERE schemaname = 'public' ORDER BY 1, 2`,
      ),
    )
    const applying = policies.filter(
      (p) => p.roles.split(',').includes('public') || p.roles.split(',').includes(READER),
    )
    expect(applying.map((p) => `${p.table}.${p.policy} ${p.command}`)).toEqual([
      'api_keys.key_lookup SELECT',
      'api_keys.tenant_isolation ALL',
      'appointment_counts_12.tenant_isolation ALL',
      'appointments.tenant_isolation ALL',
      'buckets.tenant_isolation ALL',
      'customer_counts_12.tenant_isolation ALL',
      'customers.tenant_isolation ALL',
      'list_buckets_12.tenant_isolation ALL',
      'list_changes.tenant_isolation ALL',
      'list_folds.tenant_isolation ALL',
      'list_versions_12.tenant_isolation ALL',
      'memberships.tenant_isolation ALL',
      'organizations.tenant_isolation ALL',
      'services.tenant_isolation ALL',
      'staff.tenant_isolation ALL',
    ])
    for (const policy of applying) {
      const column =
        policy.table === 'organizations' ? 'id' : policy.policy === 'key_lookup' ? 'key_hash' : 'org_id'
      const setting = policy.policy === 'key_lookup' ? 'openbook.key_hash' : 'openbook.org_id'
      expect(policy.using.replace(/[()]/g, ''), `${policy.table}.${policy.policy}`).toBe(
        `${column} = current_setting'${setting}'::text, true`,
      )
    }
    // Every other policy (the operator's full access) names a role the reader is not a member of.
    for (const policy of policies.filter((p) => !applying.includes(p))) {
      const [member] = await store.admin((sql) =>
        sql.query<{ member: boolean }>("SELECT pg_has_role($1, $2, 'MEMBER') AS member", [
          READER,
          policy.roles,
        ]),
      )
      expect(member?.member, `${policy.table}.${policy.policy} for ${policy.roles}`).toBe(false)
    }
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
      const [baseline] = await single.admin((sql) =>
        sql.query<{ timeout: string }>("SELECT current_setting('statement_timeout') AS timeout"),
      )
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
            sql.query<{
              org: string | null
              hash: string | null
              role: string
              timeout: string
              pid: number
            }>(
              `SELECT current_setting('openbook.org_id', true) AS org,
                    current_setting('openbook.key_hash', true) AS hash,
                    current_role AS role, current_setting('statement_timeout') AS timeout,
                    pg_backend_pid() AS pid`,
            ),
          )
          pids.add(after?.pid ?? -1)
          expect(after?.org ?? '').toBe('')
          expect(after?.hash ?? '').toBe('')
          expect(after?.role).not.toBe(READER)
          expect(after?.timeout).toBe(baseline?.timeout)
          // The next reader transaction on this connection that names no organization reads nothing.
          const [next] = await single.read((sql) =>
            sql.query<{ c: number; a: number; k: number }>(
              `SELECT (SELECT count(*)::int FROM customers) AS c, (SELECT count(*)::int FROM appointments) AS a,
                      (SELECT count(*)::int FROM api_keys) AS k`,
            ),
          )
          expect(next).toEqual({ c: 0, a: 0, k: 0 })
        }
      }
      expect(requests).toBe(20)
      expect(pids.size).toBe(1)
    })

    it('40 concurrent requests of two organizations queued on the one connection: each sees only its own', async () => {
      const jobs = Array.from({ length: 40 }, (_, i) => {
        const tenant = tenants[i % 2] as Tenant
        const url = i % 4 < 2 ? '/api/public/v1/appointments?limit=100' : '/api/public/v1/customers?limit=100'
        return app
          .inject({ method: 'GET', url, headers: bearer(tenant.key) })
          .then((response) => ({ tenant, url, response }))
      })
      let foreign = 0
      for (const { tenant, url, response } of await Promise.all(jobs)) {
        expect(response.statusCode).toBe(200)
        const rows = response.json<ListBody>().data
        expect(rows.length).toBeGreaterThan(0)
        for (const row of rows) {
          const own = url.includes('appointments')
            ? row.orgId === tenant.id
            : tenant.customerIds.includes(String(row.id))
          if (!own) foreign++
        }
      }
      expect(foreign).toBe(0)
    })
  },
)

describe.skipIf(!postgresAvailable())('a dedicated login role that is a member of openbook_reader', () => {
  let testStore: TestStore
  let tenants: Tenant[]
  let apiStore: Store
  let app: FastifyInstance
  let role: TestRole | undefined

  beforeAll(async () => {
    testStore = await createTestStore('postgres')
    tenants = await seedTenants(testStore.store, ['org_d1', 'org_d2'])
    // What docs/operators/production.md tells production to do (trust authentication here, so no password).
    role = await createTestRole(READER)
    const url = new URL(testStore.url as string)
    url.username = role.name
    apiStore = createPostgresStore({ connectionString: url.toString(), maxConnections: 2 })
    ;({ app } = await buildTestApp(apiStore, { logLevel: 'silent' }))
  })
  afterAll(async () => {
    // The role is cluster-wide: it is dropped even when closing the rest fails, and its error is not swallowed.
    try {
      await app?.close()
      await apiStore?.close()
      await testStore?.close()
    } finally {
      await role?.drop()
    }
  })

  it('serves each organization its own rows, is not privileged, and reads nothing outside a request', async () => {
    expect((await connectingRole(apiStore)).privileged).toBe(false)
    for (const tenant of tenants) {
      const response = await app.inject({
        method: 'GET',
        url: '/api/public/v1/appointments?limit=100',
        headers: bearer(tenant.key),
      })
      expect(response.statusCode).toBe(200)
      const rows = response.json<ListBody>().data
      expect(rows.length).toBeGreaterThan(0)
      for (const row of rows) expect(row.orgId).toBe(tenant.id)
    }
    // Its own session, with no organization named: row-level security leaves nothing to read...
    const [counts] = await apiStore.admin((sql) =>
      sql.query<{ c: number; a: number; k: number }>(
        `SELECT (SELECT count(*)::int FROM customers) AS c, (SELECT count(*)::int FROM appointments) AS a,
                (SELECT count(*)::int FROM api_keys) AS k`,
      ),
    )
    expect(counts).toEqual({ c: 0, a: 0, k: 0 })
    // ...and every other table, and any write, is refused outright.
    for (const statement of [
      'SELECT * FROM organizations',
      'SELECT * FROM users',
      'SELECT * FROM memberships',
      'SELECT * FROM staff',
      "DELETE FROM customers WHERE org_id = 'org_d1'",
      'CREATE TABLE planted (x int)',
    ]) {
      await expect(
        apiStore.admin((sql) => sql.query(statement)),
        statement,
      ).rejects.toThrow(/permission denied/)
    }
  })
})
