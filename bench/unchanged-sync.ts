/**
 * npm run bench:unchanged-sync: the nightly openbook-sync of an organization nothing changed in,
 * before and after conditional pages (ETag, If-None-Match, 304). One organization of 100,000
 * customers (`--customers`) is seeded with the real CLI into a fresh PostgreSQL database, served
 * by the current build (dist/server.js), and synced to an NDJSON file with the package's
 * openbook-sync (packages/client, built):
 *
 * 1. the first pass (the copy is made);
 * 2. "before": the next night as every night was before: a whole pass again (the state's validator
 *    taken away, as an older openbook-sync wrote none);
 * 3. "after": the next night with the validator of the last complete pass: one conditional
 *    request, answered 304.
 *
 * Each run's requests and wall time, from openbook-sync's own summary. Prints a Markdown table;
 * writes nothing else.
 */
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { parseArgs } from 'node:util'
import { assertLoopbackUrl } from './options.js'
import { ROOT, runFromRoot } from './paths.js'
import { killAll, run } from './proc.js'
import { startOpenbook } from './servers.js'
import { seedOrganization, withDatabase } from './sync-setup.js'

runFromRoot()

const { values } = parseArgs({
  options: {
    customers: { type: 'string', default: '100000' },
    pg: { type: 'string', default: process.env.BENCH_PG_URL ?? 'postgres://root@127.0.0.1:5432' },
    db: { type: 'string', default: 'openbook_bench_unchanged' },
    nights: { type: 'string', default: '3' },
  },
})
const CUSTOMERS = Number(values.customers)
if (!Number.isSafeInteger(CUSTOMERS) || CUSTOMERS < 100)
  throw new Error('--customers must be a whole number ≥ 100')
if (!/^[a-z_][a-z0-9_]{0,62}$/.test(values.db)) throw new Error('--db must be a plain lowercase identifier')
assertLoopbackUrl(values.pg)
const SERVER = values.pg.replace(/\/+$/, '')
const DATABASE_URL = `${SERVER}/${values.db}`
const log = (line: string) => process.stderr.write(`${line}\n`)

interface Summary {
  readonly rows: number
  readonly requests: number
  readonly durationMs: number
  readonly unchanged?: boolean
  readonly complete: boolean
}

async function main(): Promise<void> {
  const directory = mkdtempSync(join(tmpdir(), 'openbook-bench-unchanged-'))
  try {
    log(`seeding ${CUSTOMERS} customers of one organization into ${values.db}`)
    const keyFile = join(directory, 'key')
    await seedOrganization({
      server: SERVER,
      db: values.db,
      customers: CUSTOMERS,
      appointments: 100,
      keyFile,
    })
    const server = await startOpenbook('unchanged', ROOT, DATABASE_URL)
    const out = join(directory, 'customers.ndjson')
    const syncOnce = async (): Promise<Summary> => {
      const result = await run(
        process.execPath,
        [
          join(ROOT, 'packages/client/bin/openbook-sync.js'),
          'customers',
          '--key-file',
          keyFile,
          '--base-url',
          server.baseUrl,
          '--out',
          out,
          '--json',
        ],
        { timeoutMs: 600_000 },
      )
      if (result.code !== 0) throw new Error(`openbook-sync failed: ${result.stderr}`)
      return JSON.parse(result.stdout) as Summary
    }
    const nights = Number(values.nights)
    const table: string[] = [
      '| Run | Rows read | Requests | Wall time (openbook-sync) |',
      '| --- | --------: | -------: | ------------------------: |',
    ]
    const row = (what: string, s: Summary) =>
      table.push(`| ${what} | ${s.rows} | ${s.requests} | ${(s.durationMs / 1000).toFixed(2)} s |`)
    row('first pass', await syncOnce())
    for (let night = 1; night <= nights; night++) {
      // Before: openbook-sync without a validator (as before conditional pages) reads the whole list.
      const state = JSON.parse(readFileSync(`${out}.state.json`, 'utf8'))
      writeFileSync(`${out}.state.json`, JSON.stringify({ ...state, validator: undefined }))
      const before = await syncOnce()
      if (before.unchanged) throw new Error('a pass without a validator was skipped')
      row(`night ${night}, before (a whole pass)`, before)
      const after = await syncOnce()
      if (!after.unchanged) throw new Error('the unchanged organization was read again')
      row(`night ${night}, after (304)`, after)
    }
    process.stdout.write(`${table.join('\n')}\n`)
  } finally {
    killAll()
    rmSync(directory, { recursive: true, force: true })
    await withDatabase(`${SERVER}/postgres`, (client) =>
      client.query(`DROP DATABASE IF EXISTS ${values.db} WITH (FORCE)`),
    ).catch(() => {})
  }
}

main().catch((error) => {
  killAll()
  log(String(error?.stack ?? error))
  process.exit(1)
})
