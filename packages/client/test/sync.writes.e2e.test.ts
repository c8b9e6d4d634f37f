import { mkdtempSync, rmSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import pg from 'pg'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { runPgSync } from '../src/sync/index.js'
import { patience } from './helpers/patience.js'
import { createDatabase, hasPostgres, type TestDatabase } from './helpers/postgres.js'
import { appointmentLine, customerLine, type Salon, setUpSalon } from './helpers/salons.js'
import { type ServerProcess, startPostgresServer } from './helpers/server.js'

/**
 * A night writes only what changed: ten nights of about 200 changed customers in a salon of
 * 3,000, into PostgreSQL. Each pass writes (inserts or updates) only the changed rows, not every
 * row it read; the table stays the size of its rows. MEASURE=1 prints the figures.
 */
const SALON: Salon = { org: 'org_nights', customers: 3_000, appointments: 3_000, key: '' }
const NIGHTS = 10
const CHANGES = 200

let source: TestDatabase
let target: TestDatabase
let server: ServerProcess
let db: pg.Client
let directory: string

beforeAll(async () => {
  if (!hasPostgres) return
  source = await createDatabase('openbook_nights')
  target = await createDatabase('openbook_nights_crm')
  server = await startPostgresServer(source.url)
  await setUpSalon(server, SALON)
  db = new pg.Client({ connectionString: target.url })
  await db.connect()
  directory = mkdtempSync(join(tmpdir(), 'openbook-nights-'))
}, patience(240_000))

afterAll(async () => {
  await db?.end().catch(() => {})
  await server?.stop()
  if (directory) rmSync(directory, { recursive: true, force: true })
  await source?.drop()
  await target?.drop()
})

describe.skipIf(!hasPostgres)('openbook-sync --pg, night after night', () => {
  it(
    'writes only the rows that changed, and marks the rest seen',
    async () => {
      const table = 'crm_nights'
      const night = () =>
        runPgSync({
          resource: 'customers',
          apiKey: SALON.key,
          baseUrl: server.baseUrl,
          pg: target.url,
          table,
          statePath: join(directory, 'nights.state.json'),
        })
      const first = await night()
      expect(first).toMatchObject({ complete: true, rows: SALON.customers, written: SALON.customers })
      const written: number[] = []
      for (let n = 1; n <= NIGHTS; n++) {
        // About 200 customers restated with a change (a new display name), some of them twice.
        const changed = Array.from({ length: CHANGES }, (_, k) => (n * 977 + k * 13) % SALON.customers)
        await server.importLines(
          changed.map((k) => ({ ...customerLine(SALON, k), displayName: `night ${n} customer ${k}` })),
        )
        const summary = await night()
        expect(summary).toMatchObject({ complete: true, rows: SALON.customers, tombstones: 0, deferred: 0 })
        const { rows } = await db.query<{ n: number }>(
          `select count(*)::int as n from ${table} where sync_pass = $1`,
          [summary.pass],
        )
        written.push(rows[0]?.n ?? -1)
        expect(rows[0]?.n).toBe(new Set(changed).size)
        // The summary counts the rows written, not the rows read.
        expect(summary.written).toBe(new Set(changed).size)
      }
      const size = await db.query<{ bytes: string; rows: number }>(
        `select pg_total_relation_size('${table}')::text as bytes, (select count(*)::int from ${table}) as rows`,
      )
      if (process.env.MEASURE)
        console.log(
          `openbook-sync --pg, ${NIGHTS} nights of ${CHANGES} changes in ${SALON.customers} customers: rows written a night ${written.join(', ')}; table ${size.rows[0]?.rows} rows, ${size.rows[0]?.bytes} bytes`,
        )
    },
    patience(600_000),
  )

  it(
    'a purge between two nights costs one request more than the pass: the deletions are exact without a look-up each',
    async () => {
      const night = (window?: string) =>
        runPgSync({
          resource: 'appointments',
          apiKey: SALON.key,
          baseUrl: server.baseUrl,
          pg: target.url,
          table: window ? 'crm_purge_window' : 'crm_purge',
          statePath: join(directory, `purge${window ? '-window' : ''}.state.json`),
          ...(window ? { window, now: '2026-03-01T00:00:00Z' } : {}),
        })
      await night()
      await night('-30d..+30d')
      // A third of the appointments deactivated (old no-shows purged), spread over every customer.
      const purged = Array.from({ length: SALON.appointments / 3 }, (_, k) => k * 3)
      await server.importLines(purged.map((k) => ({ ...appointmentLine(SALON, k), isActive: false })))
      const summary = await night()
      const pages = Math.ceil((SALON.appointments - purged.length) / 99)
      expect(summary).toMatchObject({ complete: true, tombstones: purged.length, deferred: 0 })
      // The pass's pages, and one request that finds the list stood still while they were read.
      expect(summary.requests).toBe(pages + 1)
      const windowed = await night('-30d..+30d')
      // Each purged appointment in the window has a customer of its own: looking for them one
      // customer at a time would cost a request each. The check reads the list outside the window
      // once instead: two requests of one row for its size, its pages, one for "stood still".
      const startOf = (k: number) => Date.UTC(2026, 0, 1) + k * 5_400_000
      const [since, until] = [Date.UTC(2026, 0, 30), Date.UTC(2026, 2, 31)]
      const active = Array.from({ length: SALON.appointments }, (_, k) => k).filter((k) => k % 3 !== 0)
      const count = (test: (start: number) => boolean) => active.filter((k) => test(startOf(k))).length
      const reads = (rows: number) => (rows <= 100 ? 1 : 1 + Math.ceil((rows - 100) / 99))
      const inside = count((start) => start >= since && start <= until)
      const purgedInside = purged.filter((k) => startOf(k) >= since && startOf(k) <= until).length
      expect(windowed).toMatchObject({ complete: true, deferred: 0, tombstones: purgedInside })
      expect(windowed.requests).toBe(
        reads(inside) +
          1 +
          2 +
          reads(count((start) => start <= since)) +
          reads(count((start) => start >= until)) +
          1,
      )
      expect(windowed.requests).toBeLessThan(purgedInside / 4)
      if (process.env.MEASURE)
        console.log(
          `a purge of ${purged.length} of ${SALON.appointments} appointments: the next pass ${summary.requests} requests (${pages} pages), ${summary.tombstones} marked deleted; with a window of -30d..+30d, ${windowed.requests} requests, ${windowed.checked} checked, ${windowed.tombstones} marked deleted`,
        )
    },
    patience(600_000),
  )
})
