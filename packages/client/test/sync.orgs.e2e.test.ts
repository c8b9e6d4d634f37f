import { readFileSync, rmSync, statSync } from 'node:fs'
import { join } from 'node:path'
import pg from 'pg'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { Openbook } from '../src/index.js'
import { patience } from './helpers/patience.js'
import { createDatabase, hasPostgres, type TestDatabase } from './helpers/postgres.js'
import { customerId, customerLine, type Salon, SHARED, setUpSalon } from './helpers/salons.js'
import { type ServerProcess, startPostgresServer } from './helpers/server.js'
import { faultyProxy, integratorProject, killAfterRows, sync } from './helpers/sync.js'

/**
 * Several organizations (salons) synced by one integrator into one database and one file tree,
 * with the default names: each salon's rows, state and deletions stay its own, also when one of
 * them is killed mid-pass. A real server on PostgreSQL, each salon with its own key.
 */

const A: Salon = { org: 'org_salon_a', customers: 260, appointments: 90, key: '' }
const B: Salon = { org: 'org_salon_b', customers: 190, appointments: 70, key: '' }
/** A salon with customers and no appointment: its organization cannot be read from the API. */
const C: Salon = { org: 'org_salon_c', customers: 30, appointments: 0, key: '' }

let source: TestDatabase
let target: TestDatabase
let server: ServerProcess
let db: pg.Client
let directory: string

beforeAll(async () => {
  if (!hasPostgres) return
  source = await createDatabase('openbook_salons')
  target = await createDatabase('openbook_salons_crm')
  server = await startPostgresServer(source.url)
  for (const salon of [A, B, C]) await setUpSalon(server, salon)
  db = new pg.Client({ connectionString: target.url })
  await db.connect()
  directory = integratorProject('openbook-sync-salons-')
}, patience(180_000))

afterAll(async () => {
  await db?.end().catch(() => {})
  await server?.stop()
  if (directory) rmSync(directory, { recursive: true, force: true })
  await source?.drop()
  await target?.drop()
})

type Resource = 'customers' | 'appointments'

/** The salon's active rows, whole, by id, as the API serves them now. */
async function sourceRows(salon: Salon, resource: Resource): Promise<Map<string, unknown>> {
  const api = new Openbook({ apiKey: salon.key, baseUrl: server.baseUrl })
  const rows = resource === 'customers' ? api.customers.all() : api.appointments.all()
  const map = new Map<string, unknown>()
  for await (const row of rows) map.set(row.id, row)
  return map
}

/** openbook-sync in the integrator's project, where the default state files go. */
const run = (salon: Salon, args: readonly string[], baseUrl = server.baseUrl) =>
  sync([...args, '--key-env', 'SALON_KEY', '--base-url', baseUrl], {
    cwd: directory,
    env: { SALON_KEY: salon.key },
  })

const defaultTable = (salon: Salon, resource: Resource) => `openbook_${resource}_${salon.org}`
const defaultState = (salon: Salon, resource: Resource) =>
  join(directory, `openbook-sync.${target.name}.${defaultTable(salon, resource)}.state.json`)

interface TableRow {
  org_id: string
  id: string
  data: unknown
  deleted_at: Date | null
}

async function tableRows(name: string): Promise<TableRow[]> {
  return (await db.query<TableRow>(`select org_id, id, data, deleted_at from "${name}" order by id`)).rows
}

/** The table holds exactly the salon's active rows (whole), and `deleted` marked, nothing else. */
async function expectTableEqualsSource(
  salon: Salon,
  resource: Resource,
  deleted: readonly string[] = [],
): Promise<void> {
  const rows = await tableRows(defaultTable(salon, resource))
  expect(rows.every((row) => row.org_id === salon.org)).toBe(true)
  const live = new Map(rows.filter((row) => row.deleted_at === null).map((row) => [row.id, row.data]))
  expect(live).toEqual(await sourceRows(salon, resource))
  expect(
    rows
      .filter((row) => row.deleted_at !== null)
      .map((row) => row.id)
      .sort(),
  ).toEqual([...deleted].sort())
}

/** What a file sync's output says now: the last line of each id, tombstones removed. */
function fileRows(path: string): Map<string, unknown> {
  const map = new Map<string, unknown>()
  for (const line of readFileSync(path, 'utf8').split('\n').filter(Boolean)) {
    const row = JSON.parse(line) as { id: string; deletedAt?: string }
    if (row.deletedAt !== undefined && Object.keys(row).length === 2) map.delete(row.id)
    else map.set(row.id, row)
  }
  return map
}

const oneLine = (stderr: string) => {
  expect(stderr.trim().split('\n')).toHaveLength(1)
  return stderr
}

describe.skipIf(!hasPostgres)('openbook-sync, several organizations', () => {
  it(
    'keeps two salons apart in one database with the default names, one of them killed mid-pass',
    async () => {
      const pgArgs = (resource: Resource) => [resource, '--pg', target.url, '--json']
      // Salon A, a complete first pass.
      const first = await run(A, pgArgs('customers')).done
      expect(first.code, first.stderr).toBe(0)
      expect(JSON.parse(first.stdout)).toMatchObject({
        orgId: A.org,
        out: defaultTable(A, 'customers'),
        pass: 1,
        complete: true,
        rows: A.customers,
      })

      // Salon B, killed mid-pass (slowed by a proxy so that the kill lands halfway).
      const slow = await faultyProxy(server.baseUrl, ['ok'], 40)
      try {
        await killAfterRows(
          run(B, [...pgArgs('customers'), '--page-size', '10', '--checkpoint-pages', '2'], slow.url),
          defaultState(B, 'customers'),
          40,
        )
      } finally {
        await slow.close()
      }
      const killed = await tableRows(defaultTable(B, 'customers'))
      expect(killed.length).toBeGreaterThanOrEqual(40)
      expect(killed.length).toBeLessThan(B.customers)

      // A's customers change; A's second pass neither resumes from B's cursor nor touches B's rows.
      const gone = [3, 40, 41, 200].map((n) => customerId(A, n))
      await server.importLines([3, 40, 41, 200].map((n) => customerLine(A, n, false)))
      const second = await run(A, pgArgs('customers')).done
      expect(second.code, second.stderr).toBe(0)
      expect(JSON.parse(second.stdout)).toMatchObject({
        orgId: A.org,
        pass: 2,
        resumed: false,
        complete: true,
        tombstones: gone.length,
        rows: A.customers - gone.length,
      })
      expect(await tableRows(defaultTable(B, 'customers'))).toEqual(killed)

      // B goes on from its own cursor, and its complete pass marks none of A's rows.
      const resumed = await run(B, pgArgs('customers')).done
      expect(resumed.code, resumed.stderr).toBe(0)
      expect(JSON.parse(resumed.stdout)).toMatchObject({
        orgId: B.org,
        pass: 1,
        resumed: true,
        complete: true,
        rows: B.customers,
      })
      await expectTableEqualsSource(A, 'customers', gone)
      await expectTableEqualsSource(B, 'customers')

      // Appointments, same default options, both salons.
      for (const salon of [A, B]) {
        const result = await run(salon, pgArgs('appointments')).done
        expect(result.code, result.stderr).toBe(0)
        await expectTableEqualsSource(salon, 'appointments')
      }
      // The shared ids are in both salons' tables, each with its own salon's data.
      const shared = await db.query(
        `select a.data->>'displayName' as a, b.data->>'displayName' as b
       from "${defaultTable(A, 'customers')}" a join "${defaultTable(B, 'customers')}" b using (id)`,
      )
      expect(shared.rows.length).toBe(SHARED) // A's customer 3 (shared) is marked deleted, still there
      expect(shared.rows.every((row) => row.a.startsWith(A.org) && row.b.startsWith(B.org))).toBe(true)
      // Reactivated for the next tests.
      await server.importLines([3, 40, 41, 200].map((n) => customerLine(A, n, true)))
    },
    patience(240_000),
  )

  it(
    'keeps two salons apart in one file tree, one of them killed mid-pass',
    async () => {
      const tree = join(directory, 'exports')
      const out = (salon: Salon) => join(tree, `${salon.org}.customers.ndjson`)
      const fileArgs = (salon: Salon) => ['customers', '--out', out(salon), '--json']
      const firstA = await run(A, fileArgs(A)).done
      expect(firstA.code, firstA.stderr).toBe(0)

      const slow = await faultyProxy(server.baseUrl, ['ok'], 40)
      try {
        await killAfterRows(
          run(B, [...fileArgs(B), '--page-size', '10', '--checkpoint-pages', '2'], slow.url),
          `${out(B)}.state.json`,
          40,
        )
      } finally {
        await slow.close()
      }
      // Another page size: A's list has not changed, and with the same query its pass would be skipped
      // (one request answered 304); this one is read whole, next to B's state and files.
      const secondA = await run(A, [...fileArgs(A), '--page-size', '50']).done
      expect(secondA.code, secondA.stderr).toBe(0)
      expect(JSON.parse(secondA.stdout)).toMatchObject({ orgId: A.org, pass: 2, complete: true })
      const resumedB = await run(B, fileArgs(B)).done
      expect(resumedB.code, resumedB.stderr).toBe(0)
      expect(JSON.parse(resumedB.stdout)).toMatchObject({ orgId: B.org, pass: 1, resumed: true })

      expect(fileRows(out(A))).toEqual(await sourceRows(A, 'customers'))
      expect(fileRows(out(B))).toEqual(await sourceRows(B, 'customers'))

      // B's key on A's output (and so A's state): refused in one line, nothing written.
      const size = statSync(out(A)).size
      const refused = await run(B, fileArgs(A)).done
      expect(refused.code).toBe(2)
      expect(oneLine(refused.stderr)).toContain(`organization ${A.org}'s sync`)
      expect(statSync(out(A)).size).toBe(size)
    },
    patience(240_000),
  )

  it(
    "refuses, in one line, another organization's state, a table keyed on id alone, and a wrong --org",
    async () => {
      const before = await tableRows(defaultTable(A, 'customers'))
      const state = await run(B, [
        'customers',
        '--pg',
        target.url,
        '--table',
        'salon_b_elsewhere',
        '--state',
        defaultState(A, 'customers'),
      ]).done
      expect(state.code).toBe(2)
      expect(oneLine(state.stderr)).toContain(`organization ${A.org}'s sync`)
      expect(await tableRows(defaultTable(A, 'customers'))).toEqual(before)

      await db.query('create table legacy_customers (id text primary key, data jsonb not null)')
      const legacy = await run(A, ['customers', '--pg', target.url, '--table', 'legacy_customers']).done
      expect(legacy.code).toBe(2)
      expect(oneLine(legacy.stderr)).toContain('no org_id column')

      const wrongOrg = await run(A, ['customers', '--pg', target.url, '--org', B.org]).done
      expect(wrongOrg.code).toBe(2)
      expect(oneLine(wrongOrg.stderr)).toContain(`the key is organization ${A.org}'s, not --org ${B.org}'s`)
    },
    patience(120_000),
  )

  it(
    'syncs three salons with the same ids into one --table, each with its own state and deletions',
    async () => {
      const table = 'crm_customers'
      const all = async () =>
        (await db.query<TableRow>(`select org_id, id, data, deleted_at from ${table} order by org_id, id`))
          .rows
      const night = async () => {
        for (const salon of [A, B, C]) {
          const result = await run(salon, ['customers', '--pg', target.url, '--table', table, '--json']).done
          expect(result.code, result.stderr).toBe(0)
          expect(JSON.parse(result.stdout)).toMatchObject({ orgId: salon.org, out: table, complete: true })
        }
      }
      await night()
      const first = await all()
      for (const salon of [A, B, C]) {
        const own = first.filter((row) => row.org_id === salon.org)
        expect(new Map(own.map((row) => [row.id, row.data]))).toEqual(await sourceRows(salon, 'customers'))
      }
      // The same ids in every salon (ids are unique within an organization only).
      expect(first.filter((row) => row.id === customerId(A, 0)).map((row) => row.org_id)).toEqual([
        A.org,
        B.org,
        C.org,
      ])
      // Salon B deactivates customers, two of them with ids the others use too.
      const gone = [0, 1, SHARED + 3].map((n) => customerId(B, n))
      await server.importLines([0, 1, SHARED + 3].map((n) => customerLine(B, n, false)))
      await night()
      const after = await all()
      const deleted = after.filter((row) => row.deleted_at !== null)
      expect(deleted.map((row) => `${row.org_id}/${row.id}`).sort()).toEqual(
        gone.map((id) => `${B.org}/${id}`).sort(),
      )
      for (const salon of [A, B, C]) {
        const live = after.filter((row) => row.org_id === salon.org && row.deleted_at === null)
        expect(new Map(live.map((row) => [row.id, row.data]))).toEqual(await sourceRows(salon, 'customers'))
      }
      // Each salon's own state file.
      for (const salon of [A, B, C])
        expect(
          statSync(join(directory, `openbook-sync.${target.name}.${table}.${salon.org}.state.json`)).size,
        ).toBeGreaterThan(0)
      await server.importLines([0, 1, SHARED + 3].map((n) => customerLine(B, n, true)))
    },
    patience(240_000),
  )

  it(
    'syncs an organization without appointments with the defaults (the server names it), and keeps it apart too',
    async () => {
      const without = await run(C, ['customers', '--pg', target.url, '--json']).done
      expect(without.code, without.stderr).toBe(0)
      expect(JSON.parse(without.stdout)).toMatchObject({ orgId: C.org, out: defaultTable(C, 'customers') })
      await expectTableEqualsSource(C, 'customers')
      // --org is only checked.
      const given = await run(C, ['customers', '--pg', target.url, '--org', C.org, '--json']).done
      expect(given.code, given.stderr).toBe(0)
      const wrong = await run(C, ['customers', '--pg', target.url, '--org', A.org]).done
      expect(wrong.code).toBe(2)
      expect(oneLine(wrong.stderr)).toContain(`the key is organization ${C.org}'s, not --org ${A.org}'s`)
    },
    patience(120_000),
  )
})
