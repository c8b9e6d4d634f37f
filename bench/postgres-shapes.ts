/**
 * openbook on PostgreSQL at each data shape, without the rest of
 * `npm run bench`: for each shape, the 100k scale's database with the crowd
 * (`--shape-size`, default 300,000 customers and 600,000 appointments) as its largest organization
 * (`<database>_<shape>`, made or reused as `npm run bench -- --shape …` makes it), and every page of
 * the crowd (the `large` mixes: first, middle and last of customers and of appointments with each
 * filter) through openbook, at saturation and then at half that rate, evenly paced. Target: p50 at
 * half load ≤ 5 ms on every page. `spread` is the control: the full scale's largest organization,
 * of about the crowd's size, as `openbook seed` spreads it.
 *
 * `--pending 0,1000,5000`: the pages again with that many changes pending in each of the crowd's
 * lists (both folded first, then rows moved by a microsecond in `REPEATABLE READ`,
 * bench/page-times.ts), as many as readers meet between two folds; while they
 * are measured, the bench holds the lock of the server's background fold, so that they stay.
 * `--pending-rows newest`: the changes of the newest rows in each list's order (new bookings, the
 * day's status changes) instead of random rows spread over it.
 *
 *   npm run build && npm run bench:shapes -- [--shapes spread,instant,ninety,sparse] [--duration 3]
 *     [--connections 16] [--shape-size 300000,600000] [--only cus-l,apt-l] [--pending 0,1000,5000]
 *     [--pending-rows random|newest] [--server-env NAME=value,…] [--write]
 *
 * `--write` puts the table into bench/RESULTS.md between the postgres-shapes markers.
 * `--server-env NAME=value,…` sets the server's environment beyond `npm start`'s
 * (`DATABASE_POOL_SIZE=4`).
 */
import { cpus } from 'node:os'
import { parseArgs } from 'node:util'
import pg from 'pg'
import { type DataSet, databaseUrl } from './data.js'
import { halfLoad, type LoadSettings, saturate, warmServer } from './measure.js'
import {
  assertLoopbackUrl,
  parseCrowd,
  parseEnvList,
  SCALES,
  SHAPE_OPTIONS,
  shapeLoadSettings,
} from './options.js'
import { leaveMovesPending, type PendingRows, pendingOf } from './page-times.js'
import { runFromRoot } from './paths.js'
import { prepareMixes } from './prepared-mixes.js'
import { killAll, loadAverageText } from './proc.js'
import { writeResultsSection } from './report.js'
import { startOpenbook } from './servers.js'

runFromRoot()

const { values } = parseArgs({
  options: {
    ...SHAPE_OPTIONS,
    only: { type: 'string', default: 'cus-l,apt-l' },
    pending: { type: 'string', default: '0,1000,5000' },
    'pending-rows': { type: 'string', default: 'random' },
    'server-env': { type: 'string', default: '' },
    pg: { type: 'string', default: process.env.BENCH_PG_URL ?? 'postgres://root@127.0.0.1:5432' },
  },
})
assertLoopbackUrl(values.pg)
const settings: LoadSettings = shapeLoadSettings(values, 10)
/** The server's environment beyond `npm start`'s (`--server-env DATABASE_POOL_SIZE=4`). */
const serverEnv = parseEnvList(values['server-env'])
const log = (line: string) => process.stderr.write(`[${new Date().toISOString().slice(11, 19)}] ${line}\n`)
/** The shapes' target on PostgreSQL: p50 at half load, ms. */
const TARGET_P50_MS = 5

const pendingLevels = values.pending.split(',').map(Number)
if (pendingLevels.some((n) => !Number.isInteger(n) || n < 0))
  throw new Error('--pending: whole numbers of changes, comma-separated')
const pendingRows: PendingRows = ((rows) => {
  if (rows === 'random' || rows === 'newest') return rows
  throw new Error('--pending-rows: random (spread over the list) or newest')
})(values['pending-rows'])
/** The advisory lock `list_fold_pending()` takes: held, the server's background fold skips its turn. */
const FOLD_LOCK = "hashtext('openbook.list_fold_pending'), 0"

/** The crowd's lists folded, then `changes` left pending in each (none: folded only). */
async function leaveChanges(admin: pg.Client, org: string, changes: number): Promise<string> {
  await admin.query(
    `SELECT list_fold($1, 'customers', true, NULL), list_fold($1, 'appointments', true, NULL)`,
    [org],
  )
  // Moves by a microsecond: every page, total and date range the mixes ask for stays as it was.
  if (changes > 0)
    for (const list of ['customers', 'appointments'] as const)
      await leaveMovesPending(admin, org, list, changes, '1 microsecond', pendingRows)
  return `${await pendingOf(admin, org, 'customers')} / ${await pendingOf(admin, org)}`
}

const loadBefore = loadAverageText()
const rows: string[] = []
let missed = 0
for (const shape of values.shapes.split(',')) {
  // `spread`, the control: the full scale's largest organization (298,132 customers and 595,929
  // appointments, spread by `openbook seed`), the crowd's size without its shape.
  const crowd = parseCrowd(shape, values['shape-size'])
  const scale = crowd ? SCALES['100k'] : SCALES.full
  const data: DataSet = {
    pgUrl: values.pg.replace(/\/+$/, ''),
    scale: crowd ? { ...scale, database: `${scale.database}_${shape}` } : scale,
    cliDir: '.',
    fresh: false,
  }
  const stops: (() => Promise<void>)[] = []
  try {
    const { monitor, mixes } = await prepareMixes(data, log, {
      ...(crowd ? { crowd } : {}),
      only: values.only,
    })
    stops.push(() => monitor.end())
    const openbook = await startOpenbook('openbook', '.', databaseUrl(data), { env: serverEnv })
    stops.push(openbook.service.stop)
    await warmServer(
      openbook,
      mixes.map((mix) => ({ path: mix.path, key: mix.org.key })),
      settings,
    )
    const started = loadAverageText()
    const admin = new pg.Client({ connectionString: databaseUrl(data) })
    await admin.connect()
    stops.push(() => admin.end())
    const org = mixes[0]?.org.id
    for (const changes of pendingLevels) {
      // The lock first: a fold that began before it would only fold what is already there.
      await admin.query(`SELECT pg_advisory_lock(${FOLD_LOCK})`)
      try {
        const pending = org ? await leaveChanges(admin, org, changes) : '0 / 0'
        log(`${shape}: changes pending (customers / appointments): ${pending}`)
        for (const mix of mixes) {
          if (mix.org.id !== org) throw new Error('the mixes read more than the crowd')
          const saturated = await saturate(openbook, mix.path, mix.org.key, settings, monitor, true)
          const half = await halfLoad(openbook, mix.path, mix.org.key, settings, monitor, saturated.rps / 2)
          const p50 = half.p50 ?? Number.POSITIVE_INFINITY
          if (!(p50 <= TARGET_P50_MS)) missed++
          const failures = saturated.failures + half.failures
          log(
            `${shape} ${mix.id}, ${pending} pending: ${Math.round(saturated.rps)}/s saturated; at ${Math.round(half.rps)}/s p50 ` +
              `${half.p50?.toFixed(2)} p99 ${half.p99?.toFixed(2)} ms${failures ? ` FAILURES ${failures}` : ''}`,
          )
          rows.push(
            `| ${shape} | ${pending} | ${mix.id} | ${mix.label} | ${Math.round(saturated.rps)} | ${Math.round(half.rps)} | ` +
              `${half.p50?.toFixed(2)} | ${half.p99?.toFixed(2)} | ${failures} |`,
          )
        }
      } finally {
        await admin.query(`SELECT pg_advisory_unlock(${FOLD_LOCK})`)
      }
    }
    // Leave the database as the next run expects it: folded.
    if (org) await leaveChanges(admin, org, 0)
    log(`${shape}: load average ${started} at its start, ${loadAverageText()} at its end`)
  } finally {
    for (const stop of stops.reverse()) await stop().catch(() => undefined)
  }
}
killAll()
const loadAfter = loadAverageText()

const table = [
  `\`npm run bench:shapes -- --shapes ${values.shapes} --duration ${values.duration} --pending ${values.pending} --pending-rows ${pendingRows}${values['server-env'] ? ` --server-env ${values['server-env']}` : ''}\`: openbook (the built ` +
    `server) on PostgreSQL, the 100k scale with a crowd of ${values['shape-size'].replace(',', ' customers and ')} ` +
    `appointments at each shape as its largest organization; each of the crowd's pages at saturation ` +
    `(${settings.connections} connections, ${settings.duration} s after 1 s of warm-up), then at half that rate, ` +
    `evenly paced; with ${values.pending.replaceAll(',', ', ')} changes pending in each of its lists (folds held off), of ${pendingRows === 'random' ? 'random rows' : 'its newest rows'}; ` +
    `${cpus().length} cores, load average (1, 5, 15 min) ${loadBefore} before, ${loadAfter} after. ` +
    `Target: p50 at half load ≤ ${TARGET_P50_MS} ms; ${missed === 0 ? 'every page is within it' : `${missed} of ${rows.length} pages are not`}.`,
  '',
  '| shape | pending (customers / appointments) | mix | page | req/s saturated | req/s half | p50 ms half | p99 ms half | failures |',
  '|---|---|---|---|---:|---:|---:|---:|---:|',
  ...rows,
].join('\n')
process.stdout.write(`${table}\n`)
if (values.write) writeResultsSection('postgres-shapes', `## PostgreSQL at each data shape\n\n${table}`)
