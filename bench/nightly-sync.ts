/**
 * npm run bench:nightly-sync: what `openbook-sync appointments --pg` costs night after night on a
 * salon of the size integrators run (40,000 customers, 150,000 appointments by default).
 *
 * One organization is seeded with the real CLI into a fresh PostgreSQL database and served by the
 * current build (dist/server.js); its appointments are copied with the package's openbook-sync
 * (packages/client, built) into a table of a second database, with a fixed window (`--since-days`
 * back from today to 400 days ahead). Then:
 *
 * 1. the first pass;
 * 2. `--nights` nights, each after a writer made `--changes` changes (notes, statuses, starts
 *    moved by a day) through SQL, as the salon software does: each pass's requests, the rows it
 *    inserted and updated in the copy (pg_stat_user_tables) and the copy's size;
 * 3. a purge: the `--purge` oldest no-shows in the window deactivated at once, then one pass:
 *    its requests, and how many of them the deletion check made.
 *
 * `--client-dir DIR` runs the openbook-sync of another build of packages/client (a checkout of
 * another commit, built), to compare two on the same data.
 *
 * Prints a Markdown table; writes nothing else.
 */
import { mkdtempSync, rmSync } from 'node:fs'
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
    customers: { type: 'string', default: '40000' },
    appointments: { type: 'string', default: '150000' },
    nights: { type: 'string', default: '10' },
    changes: { type: 'string', default: '200' },
    purge: { type: 'string', default: '9870' },
    'since-days': { type: 'string', default: '1500' },
    pg: { type: 'string', default: process.env.BENCH_PG_URL ?? 'postgres://root@127.0.0.1:5432' },
    db: { type: 'string', default: 'openbook_bench_nightly' },
    'client-dir': { type: 'string', default: join(ROOT, 'packages/client') },
  },
})
const wholeNumber = (name: string, text: string, min: number): number => {
  const value = Number(text)
  if (!Number.isSafeInteger(value) || value < min)
    throw new Error(`--${name} must be a whole number ≥ ${min}`)
  return value
}
const CUSTOMERS = wholeNumber('customers', values.customers, 100)
const APPOINTMENTS = wholeNumber('appointments', values.appointments, 100)
const NIGHTS = wholeNumber('nights', values.nights, 0)
const CHANGES = wholeNumber('changes', values.changes, 0)
const PURGE = wholeNumber('purge', values.purge, 0)
const SINCE_DAYS = wholeNumber('since-days', values['since-days'], 1)
if (!/^[a-z_][a-z0-9_]{0,50}$/.test(values.db)) throw new Error('--db must be a plain lowercase identifier')
assertLoopbackUrl(values.pg)
const SERVER = values.pg.replace(/\/+$/, '')
const DATABASE_URL = `${SERVER}/${values.db}`
const COPY_URL = `${SERVER}/${values.db}_copy`
const TABLE = 'appointments_copy'
const log = (line: string) => process.stderr.write(`${line}\n`)

interface Summary {
  readonly rows: number
  readonly requests: number
  readonly tombstones: number
  readonly checked: number
  readonly leftWindow: number
  readonly deferred: number
  readonly complete: boolean
  readonly durationMs: number
}

/** The copy's writes so far and its size, once the sync's session has ended (its stats flushed). */
async function copyStats(): Promise<{ inserts: number; updates: number; bytes: number }> {
  await new Promise((resolve) => setTimeout(resolve, 1_500))
  return withDatabase(COPY_URL, async (client) => {
    const { rows } = await client.query<{ ins: string; upd: string; bytes: string }>(
      `select n_tup_ins::text as ins, n_tup_upd::text as upd,
              pg_total_relation_size(relid)::text as bytes
       from pg_stat_user_tables where relname = $1`,
      [TABLE],
    )
    const row = rows[0]
    return { inserts: Number(row?.ins ?? 0), updates: Number(row?.upd ?? 0), bytes: Number(row?.bytes ?? 0) }
  })
}

/** A writer's night: `count` changes to random active appointments of the organization. */
async function changeSome(orgId: string, count: number, night: number): Promise<void> {
  await withDatabase(DATABASE_URL, async (client) => {
    const { rows } = await client.query<{ id: string }>(
      `select id from appointments where org_id = $1 and is_active order by md5(id || $2) limit $3`,
      [orgId, String(night), count],
    )
    for (const [index, { id }] of rows.entries()) {
      const change =
        index % 4 === 0
          ? `start_at = start_at + interval '1 day', end_at = end_at + interval '1 day'`
          : index % 4 === 1
            ? `status = 'confirmed'`
            : `note = 'night ${night}'`
      await client.query(
        `update appointments set ${change}, updated_at = now() where org_id = $1 and id = $2`,
        [orgId, id],
      )
    }
  })
}

async function main(): Promise<void> {
  const directory = mkdtempSync(join(tmpdir(), 'openbook-bench-nightly-'))
  try {
    log(`seeding ${CUSTOMERS} customers, ${APPOINTMENTS} appointments of one organization into ${values.db}`)
    const keyFile = join(directory, 'key')
    const orgId = await seedOrganization({
      server: SERVER,
      db: values.db,
      customers: CUSTOMERS,
      appointments: APPOINTMENTS,
      keyFile,
    })
    await withDatabase(`${SERVER}/postgres`, async (client) => {
      await client.query(`DROP DATABASE IF EXISTS ${values.db}_copy WITH (FORCE)`)
      await client.query(`CREATE DATABASE ${values.db}_copy`)
    })
    const server = await startOpenbook('nightly', ROOT, DATABASE_URL)
    const day = 86_400_000
    const today = Math.floor(Date.now() / day) * day
    const since = new Date(today - SINCE_DAYS * day).toISOString()
    const until = new Date(today + 400 * day).toISOString()
    const inWindow = await withDatabase(DATABASE_URL, async (client) => {
      const { rows } = await client.query<{ n: string }>(
        'select count(*)::text as n from appointments where org_id = $1 and is_active and start_at between $2 and $3',
        [orgId, since, until],
      )
      return Number(rows[0]?.n)
    })
    log(`window ${since}..${until}: ${inWindow} active appointments`)

    const syncOnce = async (): Promise<Summary> => {
      const result = await run(
        process.execPath,
        [
          join(values['client-dir'], 'bin/openbook-sync.js'),
          'appointments',
          '--key-file',
          keyFile,
          '--base-url',
          server.baseUrl,
          '--pg',
          COPY_URL,
          '--table',
          TABLE,
          '--state',
          join(directory, 'state.json'),
          '--since',
          since,
          '--until',
          until,
          '--json',
        ],
        { timeoutMs: 1_800_000 },
      )
      if (result.code !== 0) throw new Error(`openbook-sync failed (${result.code}): ${result.stderr}`)
      const summary = JSON.parse(result.stdout) as Summary
      if (!summary.complete) throw new Error('a pass did not complete')
      return summary
    }

    const table: string[] = [
      '| Night | Rows read | Requests | Of which the deletion check | Marked deleted | Rows inserted | Rows updated | Copy size | Wall time |',
      '| ----- | --------: | -------: | --------------------------: | -------------: | ------------: | -----------: | --------: | --------: |',
    ]
    let before = await copyStats()
    const night = async (what: string, pages: () => Promise<number>) => {
      const expectedPages = await pages()
      const summary = await syncOnce()
      const after = await copyStats()
      const check = summary.requests - expectedPages
      table.push(
        `| ${what} | ${summary.rows} | ${summary.requests} | ${summary.checked > 0 ? check : 0} | ${summary.tombstones} | ${after.inserts - before.inserts} | ${after.updates - before.updates} | ${(after.bytes / 1048576).toFixed(1)} MB | ${(summary.durationMs / 1000).toFixed(1)} s |`,
      )
      log(`${what}: ${JSON.stringify(summary)}`)
      before = after
    }
    // The requests of a pass that nothing moves under: 100 rows first, then 99 new rows a request.
    const passPages = async () =>
      withDatabase(DATABASE_URL, async (client) => {
        const { rows } = await client.query<{ n: string }>(
          'select count(*)::text as n from appointments where org_id = $1 and is_active and start_at between $2 and $3',
          [orgId, since, until],
        )
        return 1 + Math.max(0, Math.ceil((Number(rows[0]?.n) - 100) / 99))
      })
    await night('first pass', passPages)
    for (let n = 1; n <= NIGHTS; n++) {
      await changeSome(orgId, CHANGES, n)
      await night(`night ${n}, ${CHANGES} changes`, passPages)
    }
    if (PURGE > 0) {
      const purged = await withDatabase(DATABASE_URL, async (client) => {
        const { rowCount } = await client.query(
          `update appointments set is_active = false, updated_at = now()
           where org_id = $1 and id in (
             select id from appointments where org_id = $1 and is_active and status = 'no_show'
               and start_at between $2 and $3 order by start_at limit $4)`,
          [orgId, since, until, PURGE],
        )
        return rowCount ?? 0
      })
      await night(`after a purge of ${purged} old no-shows`, passPages)
    }
    process.stdout.write(
      `${CUSTOMERS} customers, ${APPOINTMENTS} appointments; window ${since.slice(0, 10)}..${until.slice(0, 10)} (${inWindow} active in it)\n\n${table.join('\n')}\n`,
    )
  } finally {
    killAll()
    rmSync(directory, { recursive: true, force: true })
    await withDatabase(`${SERVER}/postgres`, async (client) => {
      await client.query(`DROP DATABASE IF EXISTS ${values.db} WITH (FORCE)`)
      await client.query(`DROP DATABASE IF EXISTS ${values.db}_copy WITH (FORCE)`)
    }).catch(() => {})
  }
}

main().catch((error) => {
  killAll()
  log(String(error?.stack ?? error))
  process.exit(1)
})
