import { mkdtempSync, rmSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import pg from 'pg'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { runPgSync } from '../src/sync/index.js'
import { patience } from './helpers/patience.js'
import { createDatabase, hasPostgres, type TestDatabase } from './helpers/postgres.js'
import { customerLine, type Salon, setUpSalon } from './helpers/salons.js'
import { type ServerProcess, startPostgresServer } from './helpers/server.js'

/**
 * A night writes only what changed: ten nights of about 200 changed customers in a salon of
 * 3,000, into PostgreSQL. Each pass writes (inserts or updates) only the changed rows, not every
 * row it read; the table stays the size of its rows. MEASURE=1 prints the figures.
 */
const SALON: Salon = { org: 'org_nights', customers: 3_000, appointments: 0, key: '' }
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
      expect(first).toMatchObject({ complete: true, rows: SALON.customers })
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
})
