/**
 * npm run bench:writer: what a booking application's writes cost on openbook's tables, against the
 * same statements on copies of the tables without openbook's triggers (same columns, indexes,
 * checks and foreign keys), alternating statement by statement in one run.
 *
 * For each organization size and time shape: every one-row statement a booking screen makes
 * (insert, status change, move, deactivation, delete, move to another organization; customers too),
 * each alone in autocommit with synchronous_commit off so that the disk hides nothing, p50 and
 * p99; then 1, 4 and 16 concurrent writers of one organization (40 % appointment inserts, 40 %
 * status changes, 20 % customer inserts), writes a second. Both in each isolation level of
 * `--isolation`, the plain copies in the same level: openbook's cost ratio per level (REPEATABLE
 * READ and SERIALIZABLE never fold at their commit), with the changes each level's writers leave
 * pending and the pages beside them.
 */
import { appendFileSync } from 'node:fs'
import { performance } from 'node:perf_hooks'
import { parseArgs } from 'node:util'
import pg from 'pg'
import { assertLoopbackUrl } from './options.js'
import { leavePending, type PageTimes, pendingOf, timePages } from './page-times.js'
import { runFromRoot } from './paths.js'
import { runOk } from './proc.js'
import { writeResultsSection } from './report.js'

runFromRoot()

const { values } = parseArgs({
  options: {
    pg: { type: 'string', default: process.env.BENCH_PG_URL ?? 'postgres://root@127.0.0.1:5432' },
    db: { type: 'string', default: 'openbook_bench_writer' },
    // Appointments of the measured organization, and the shapes their times take.
    sizes: { type: 'string', default: '200000,1000000' },
    shapes: { type: 'string', default: 'spread,day,instant' },
    // The shapes measured at the largest size (the others run at every size).
    'large-shapes': { type: 'string', default: 'spread' },
    // Runs of each statement: a fold lands on about one in 512 of them, so that p99 needs 1,000.
    iterations: { type: 'string', default: '1000' },
    writers: { type: 'string', default: '1,4,16' },
    // The levels the one-row statements and the writers run in, each against the plain copies in the same level.
    isolation: { type: 'string', default: 'read committed,repeatable read,serializable' },
    seconds: { type: 'string', default: '4' },
    'no-write': { type: 'boolean', default: false },
    // A file to append each statement's times to, one JSON line a statement.
    samples: { type: 'string' },
  },
})
assertLoopbackUrl(values.pg)
const SERVER = values.pg.replace(/\/+$/, '')
const DATABASE_URL = `${SERVER}/${values.db}`
const SIZES = values.sizes.split(',').map(Number)
const SHAPES = values.shapes.split(',') as Shape[]
const LARGE_SHAPES = new Set(values['large-shapes'].split(','))
const ITERATIONS = Number(values.iterations)
const WRITERS = values.writers.split(',').map(Number)
const SECONDS = Number(values.seconds)
const LEVELS = values.isolation.split(',').map((level) => level.trim().toLowerCase())
for (const level of LEVELS)
  if (!['read committed', 'repeatable read', 'serializable'].includes(level))
    throw new Error(`--isolation: ${level} is not read committed, repeatable read or serializable`)
/** Only READ COMMITTED: the run writes the writer section as it always did. */
const RC_ONLY = LEVELS.length === 1 && LEVELS[0] === 'read committed'
const SERIALIZATION_FAILURES = new Set(['40001', '40P01'])
const log = (line: string) => process.stderr.write(`${line}\n`)

type Shape = 'spread' | 'day' | 'instant'
const ORG = 'org_big'
const OTHER = 'org_other'
const STAFF = 40

/** SQL of the start of appointment `g` by shape: over years, within one day, or one instant. */
const startOf = (shape: Shape, g: string) =>
  shape === 'spread'
    ? `timestamptz '2019-01-01' + ${g} * interval '7 minutes'`
    : shape === 'day'
      ? `timestamptz '2025-03-01' + (${g} % 86400) * interval '1 second'`
      : `timestamptz '2025-03-01 09:00' + (${g} * 0) * interval '1 second'`

async function withClient<T>(url: string, use: (client: pg.Client) => Promise<T>): Promise<T> {
  const client = new pg.Client({ connectionString: url })
  await client.connect()
  try {
    return await use(client)
  } finally {
    await client.end()
  }
}

async function prepareDatabase(size: number, shape: Shape): Promise<void> {
  await withClient(`${SERVER}/postgres`, async (client) => {
    await client.query(`DROP DATABASE IF EXISTS ${values.db} WITH (FORCE)`)
    await client.query(`CREATE DATABASE ${values.db}`)
  })
  await runOk(process.execPath, ['bin/openbook.js', 'migrate', '--json'], {
    env: { ...process.env, DATABASE_URL },
  })
  await withClient(DATABASE_URL, async (client) => {
    // Loaded as openbook's import loads: each statement's entries straight into the buckets.
    await client.query("SET openbook.fold = 'now'")
    for (const org of [ORG, OTHER]) {
      await client.query(`INSERT INTO organizations (id, name, plan) VALUES ($1, $1, 'professional')`, [org])
      await client.query(
        `INSERT INTO staff (org_id, id) SELECT $1, 'stf_' || g FROM generate_series(1, ${STAFF}) g`,
        [org],
      )
    }
    await client.query(
      `INSERT INTO customers (org_id, id, first_name, is_active, created_at, updated_at)
       SELECT '${ORG}', 'cus_' || g, 'Name', g % 10 <> 0, ${startOf(shape, 'g')}, now()
       FROM generate_series(1, ${Math.ceil(size / 4)}) g`,
    )
    await client.query(
      `INSERT INTO appointments (org_id, id, customer_id, staff_id, start_at, end_at, status, price_cents,
                                 is_active, created_at, updated_at)
       SELECT '${ORG}', 'apt_' || g, 'cus_' || (1 + g % ${Math.ceil(size / 4)}),
              CASE WHEN g % 8 = 0 THEN NULL ELSE 'stf_' || (1 + g % ${STAFF}) END,
              ${startOf(shape, 'g')}, ${startOf(shape, 'g')} + interval '45 minutes',
              (ARRAY['scheduled','confirmed','checked_in','no_show','cancelled','completed'])[1 + g % 6], 4500,
              g % 13 <> 0, now(), now()
       FROM generate_series(1, ${size}) g`,
    )
    await client.query('SELECT list_fold_all()')
    // The plain tables: the same rows, columns, checks, indexes and foreign keys, no trigger.
    for (const table of ['customers', 'appointments']) {
      await client.query(`CREATE TABLE plain_${table} (LIKE ${table} INCLUDING ALL)`)
      await client.query(`INSERT INTO plain_${table} SELECT * FROM ${table}`)
    }
    await client.query(`ALTER TABLE plain_customers ADD FOREIGN KEY (org_id) REFERENCES organizations (id),
      ADD FOREIGN KEY (org_id, preferred_staff_id) REFERENCES staff (org_id, id)`)
    await client.query(`ALTER TABLE plain_appointments ADD FOREIGN KEY (org_id) REFERENCES organizations (id),
      ADD FOREIGN KEY (org_id, customer_id) REFERENCES plain_customers (org_id, id),
      ADD FOREIGN KEY (org_id, staff_id) REFERENCES staff (org_id, id),
      ADD FOREIGN KEY (org_id, service_id) REFERENCES services (org_id, id)`)
    // The tables as a salon's are between bookings: vacuumed (else autovacuum vacuums the loaded
    // rows, both tables' copies, while the statements are timed) and checkpointed.
    await client.query('VACUUM ANALYZE')
    await client.query('CHECKPOINT')
  })
}

/** A one-row statement: its SQL on a table prefix ('' or 'plain_') and the parameters of its i-th run. */
interface Statement {
  readonly name: string
  readonly sql: (prefix: string) => string
  readonly params: (i: number) => unknown[]
}

async function sampleIds(client: pg.Client, staff: boolean, count: number): Promise<string[]> {
  const { rows } = await client.query<{ id: string }>(
    `SELECT id FROM appointments WHERE org_id = $1 AND is_active AND staff_id IS ${staff ? 'NOT ' : ''}NULL
     ORDER BY md5(id) LIMIT $2`,
    [ORG, count],
  )
  return rows.map((row) => row.id)
}

function statementsFor(shape: Shape, staffIds: string[], noStaffIds: string[], level: number): Statement[] {
  const per = ITERATIONS
  // Each statement kind, in each level, takes its own rows, so that no run finds its row gone.
  const slice = (ids: string[], k: number) => ids.slice((level * 6 + k) * per, (level * 6 + k + 1) * per)
  const pick = (ids: string[]) => (i: number) => [ids[i % ids.length]]
  const start = startOf(shape, '$2::int')
  const kinds = (label: string, ids: string[], staff: string) => [
    {
      name: `INSERT an appointment${label}`,
      sql: (p: string) =>
        `INSERT INTO ${p}appointments (org_id, id, staff_id, start_at, end_at, status, is_active, created_at, updated_at)
         VALUES ('${ORG}', $1, ${staff}, ${start}, ${start} + interval '1 hour', 'scheduled', true, now(), now())`,
      params: (i: number) => [`apt_new${label.length}_${level}_${i}`, 1000 + i * 37],
    },
    {
      name: `UPDATE its status${label}`,
      sql: (p: string) =>
        `UPDATE ${p}appointments SET status = 'confirmed', updated_at = now() WHERE org_id = '${ORG}' AND id = $1`,
      params: pick(slice(ids, 0)),
    },
    {
      name: `UPDATE its start (a move)${label}`,
      sql: (p: string) =>
        `UPDATE ${p}appointments SET start_at = start_at + interval '1 day', end_at = end_at + interval '1 day' WHERE org_id = '${ORG}' AND id = $1`,
      params: pick(slice(ids, 1)),
    },
    {
      name: `UPDATE its note${label}`,
      sql: (p: string) =>
        `UPDATE ${p}appointments SET note = 'call first' WHERE org_id = '${ORG}' AND id = $1`,
      params: pick(slice(ids, 2)),
    },
    {
      name: `UPDATE is_active = false${label}`,
      sql: (p: string) => `UPDATE ${p}appointments SET is_active = false WHERE org_id = '${ORG}' AND id = $1`,
      params: pick(slice(ids, 3)),
    },
    {
      name: `UPDATE to another organization${label}`,
      sql: (p: string) =>
        `UPDATE ${p}appointments SET org_id = '${OTHER}', customer_id = NULL, staff_id = NULL WHERE org_id = '${ORG}' AND id = $1`,
      params: pick(slice(ids, 4)),
    },
    {
      name: `DELETE${label}`,
      sql: (p: string) => `DELETE FROM ${p}appointments WHERE org_id = '${ORG}' AND id = $1`,
      params: pick(slice(ids, 5)),
    },
  ]
  return [
    ...kinds(' (with a staff member)', staffIds, "'stf_7'"),
    ...kinds(' (without)', noStaffIds, 'NULL'),
    {
      name: 'INSERT a customer',
      sql: (p: string) =>
        `INSERT INTO ${p}customers (org_id, id, first_name, is_active, created_at, updated_at)
         VALUES ('${ORG}', $1, 'New', true, now(), now())`,
      params: (i: number) => [`cus_new_${level}_${i}`],
    },
    {
      name: 'UPDATE a customer',
      sql: (p: string) =>
        `UPDATE ${p}customers SET first_name = 'Renamed' WHERE org_id = '${ORG}' AND id = $1`,
      params: (i: number) => [`cus_${1 + i * 7}`],
    },
    {
      name: 'DELETE a customer',
      sql: (p: string) => `DELETE FROM ${p}customers WHERE org_id = '${ORG}' AND id = $1`,
      params: (i: number) => [`cus_new_${level}_${i}`],
    },
  ]
}

const quantile = (sorted: number[], q: number) =>
  sorted[Math.min(sorted.length - 1, Math.floor(q * sorted.length))] ?? Number.NaN

interface Latency {
  readonly name: string
  readonly openbook: { p50: number; p99: number }
  readonly plain: { p50: number; p99: number }
}

async function oneRowLatencies(client: pg.Client, statements: Statement[]): Promise<Latency[]> {
  const results: Latency[] = []
  for (const statement of statements) {
    const times = { openbook: [] as number[], plain: [] as number[] }
    for (let i = 0; i < ITERATIONS; i++) {
      // Alternating, the order swapped every other run.
      const order = i % 2 === 0 ? (['', 'plain_'] as const) : (['plain_', ''] as const)
      for (const prefix of order) {
        const started = performance.now()
        await client.query(statement.sql(prefix), statement.params(i))
        times[prefix === '' ? 'openbook' : 'plain'].push(performance.now() - started)
      }
    }
    const summary = (list: number[]) => {
      const sorted = [...list].sort((a, b) => a - b)
      return { p50: quantile(sorted, 0.5), p99: quantile(sorted, 0.99) }
    }
    results.push({ name: statement.name, openbook: summary(times.openbook), plain: summary(times.plain) })
    // Every run's time, in run order: where a statement's tail comes from (a fold lands on a run).
    if (values.samples)
      appendFileSync(values.samples, `${JSON.stringify({ name: statement.name, ...times })}\n`)
    log(
      `  ${statement.name}: ${results.at(-1)?.openbook.p50.toFixed(2)} against ${results.at(-1)?.plain.p50.toFixed(2)} ms`,
    )
  }
  return results
}

interface Concurrent {
  readonly perSecond: number
  readonly p99: number
  /** Serialization failures (and deadlocks) run again, as an application would. */
  readonly retries: number
  /** The most changes pending at once, sampled every 250 ms (openbook's tables only). */
  readonly pendingMost: number
}

interface Throughput {
  readonly writers: number
  readonly openbook: Concurrent
  readonly plain: Concurrent
}

/** The most changes pending in list_changes until `done` settles, sampled every 250 ms. */
async function mostPending(done: Promise<unknown>): Promise<number> {
  return withClient(DATABASE_URL, async (client) => {
    let most = 0
    let finished = false
    void done.finally(() => {
      finished = true
    })
    while (!finished) {
      const { rows } = await client.query<{ n: number }>('SELECT count(*)::int AS n FROM list_changes')
      most = Math.max(most, rows[0]?.n ?? 0)
      await new Promise((resolve) => setTimeout(resolve, 250))
    }
    return most
  })
}

/**
 * `writers` clients of one organization, for SECONDS, on a table prefix: writes a second, p99,
 * and on openbook's tables the most changes pending at once.
 */
async function concurrent(
  writers: number,
  prefix: string,
  round: number,
  level: number,
): Promise<Concurrent> {
  const clients = await Promise.all(
    Array.from({ length: writers }, async () => {
      const client = new pg.Client({ connectionString: DATABASE_URL })
      await client.connect()
      await client.query('SET synchronous_commit = off')
      await client.query(`SET default_transaction_isolation = '${LEVELS[level]}'`)
      return client
    }),
  )
  let retries = 0
  /** One autocommit statement, run again on a serialization failure; its time includes the retries. */
  const write = async (client: pg.Client, sql: string, params: unknown[]) => {
    for (;;) {
      try {
        return await client.query(sql, params)
      } catch (error) {
        if (!SERIALIZATION_FAILURES.has((error as { code?: string }).code ?? '')) throw error
        retries++
      }
    }
  }
  const ids = await sampleIds(clients[0] as pg.Client, true, 20_000)
  const latencies: number[] = []
  const deadline = performance.now() + SECONDS * 1000
  let n = 0
  const writing = Promise.all(
    clients.map(async (client, w) => {
      let i = 0
      while (performance.now() < deadline) {
        const k = i++ % 5
        const tag = `${prefix || 'o'}${level}_${round}_${writers}_${w}_${i}`
        const started = performance.now()
        if (k < 2)
          await write(
            client,
            `INSERT INTO ${prefix}appointments (org_id, id, staff_id, start_at, end_at, status, is_active, created_at, updated_at)
             VALUES ('${ORG}', $1, 'stf_3', now(), now() + interval '1 hour', 'scheduled', true, now(), now())`,
            [`apt_c_${tag}`],
          )
        else if (k < 4)
          await write(
            client,
            `UPDATE ${prefix}appointments SET status = (ARRAY['confirmed','checked_in','completed'])[1 + $2::int % 3] WHERE org_id = '${ORG}' AND id = $1`,
            [ids[(w * 7919 + i * 13) % ids.length], i],
          )
        else
          await write(
            client,
            `INSERT INTO ${prefix}customers (org_id, id, is_active, created_at, updated_at) VALUES ('${ORG}', $1, true, now(), now())`,
            [`cus_c_${tag}`],
          )
        latencies.push(performance.now() - started)
        n++
      }
    }),
  )
  const pendingMost = prefix === '' ? await mostPending(writing) : 0
  await writing
  await Promise.all(clients.map((client) => client.end()))
  const sorted = latencies.sort((a, b) => a - b)
  return { perSecond: n / SECONDS, p99: quantile(sorted, 0.99), retries, pendingMost }
}

/** The one-row statements and the writers in one isolation level, and what they left pending. */
interface LevelRun {
  readonly level: string
  readonly latencies: Latency[]
  readonly throughput: Throughput[]
  /** Changes pending once the level's writers are done: the organization's appointments, and all. */
  readonly pending: { readonly appointments: number; readonly all: number }
  /** The page statements beside those pending changes. */
  readonly pages: PageTimes[]
  /** Then one background fold, as a server runs every second (list_fold_pending()): its time, and the same. */
  readonly folded: {
    readonly ms: number
    readonly appointments: number
    readonly all: number
    readonly pages: PageTimes[]
  }
}

interface Run {
  readonly size: number
  readonly shape: Shape
  /** The first level's (READ COMMITTED by default): the tables the writer section always had. */
  readonly latencies: Latency[]
  readonly throughput: Throughput[]
  readonly levels: LevelRun[]
  readonly pendingAfter: number
  /** The fold's own time, by the number of changes it folds: what the one writer that runs it pays. */
  readonly folds: { changes: number; ms: number }[]
  readonly bulk: Bulk
  /** The page statements' times with as many changes pending as the writers leave, and more. */
  readonly pages: { pending: number; vacuumed: boolean; times: PageTimes[] }[]
}

const BULK_ROWS = 100_000

/**
 * Changes pending beside the pages timed: none, a fold's worth of status changes (512 entries),
 * and more than the writers above leave at once.
 */
const PENDING = [0, 1_024, 5_000]

/** The date ranges of the timed pages: the middle half and the middle tenth of the shape's times. */
function pageDates(size: number, shape: Shape): { wide: [string, string]; narrow: [string, string] } {
  if (shape === 'instant')
    return {
      wide: ['2025-03-01T09:00:00Z', '2025-03-01T09:00:01Z'],
      narrow: ['2025-03-01T09:00:00Z', '2025-03-01T09:00:01Z'],
    }
  if (shape === 'day')
    return {
      wide: ['2025-03-01T06:00:00Z', '2025-03-01T18:00:00Z'],
      narrow: ['2025-03-01T11:24:00Z', '2025-03-01T12:36:00Z'],
    }
  const at = (g: number) => new Date(Date.parse('2019-01-01T00:00:00Z') + g * 7 * 60_000).toISOString()
  return { wide: [at(size * 0.25), at(size * 0.75)], narrow: [at(size * 0.45), at(size * 0.55)] }
}

const slowest = (times: PageTimes[]) => Math.max(...times.flatMap((t) => t.cells.map((c) => c.ms)))

/** Seconds of a bulk write's statement and of its commit, where the folds run. */
type Timed = { statement: number; commit: number }
interface Bulk {
  readonly insert: { openbook: Timed; plain: Timed }
  readonly update: { openbook: Timed; plain: Timed }
}

/**
 * A bulk write in one transaction, as a salon software's migration script would make it: BULK_ROWS
 * appointments into a new organization in one INSERT, then one UPDATE of all their statuses; on
 * openbook's tables and on the plain copies.
 */
async function bulkWrites(client: pg.Client, round: number): Promise<Bulk> {
  const org = `org_bulk_${round}`
  await client.query(`INSERT INTO organizations (id, name, plan) VALUES ($1, $1, 'free')`, [org])
  const timed = async (statement: string): Promise<Timed> => {
    await client.query('BEGIN')
    const started = performance.now()
    await client.query(statement, [org])
    const written = performance.now()
    await client.query('COMMIT')
    return { statement: (written - started) / 1000, commit: (performance.now() - written) / 1000 }
  }
  const insert = (prefix: string) =>
    timed(`INSERT INTO ${prefix}appointments (org_id, id, start_at, end_at, status, is_active, created_at, updated_at)
      SELECT $1, 'apt_bulk_' || g, t, t + interval '1 hour', (ARRAY['scheduled','confirmed','completed'])[1 + g % 3],
             true, now(), now()
      FROM generate_series(1, ${BULK_ROWS}) g, LATERAL (SELECT timestamptz '2026-01-01' + g * interval '7 minutes' AS t) x`)
  const update = (prefix: string) =>
    timed(`UPDATE ${prefix}appointments SET status = CASE status WHEN 'confirmed' THEN 'completed' ELSE 'confirmed' END
      WHERE org_id = $1`)
  return {
    insert: { openbook: await insert(''), plain: await insert('plain_') },
    update: { openbook: await update(''), plain: await update('plain_') },
  }
}

/** A fold of `changes` pending changes of the organization's appointments (leavePending), timed alone: median of 3. */
async function foldCost(client: pg.Client, changes: number): Promise<number> {
  const times: number[] = []
  for (let round = 0; round < 3; round++) {
    await leavePending(client, ORG, changes)
    const started = performance.now()
    await client.query('SELECT list_fold($1, $2, true, NULL)', [ORG, 'appointments'])
    times.push(performance.now() - started)
  }
  return quantile(
    times.sort((a, b) => a - b),
    0.5,
  )
}

async function measure(size: number, shape: Shape): Promise<Run> {
  log(`${size} appointments, ${shape}: preparing`)
  await prepareDatabase(size, shape)
  return withClient(DATABASE_URL, async (client) => {
    await client.query('SET synchronous_commit = off')
    const needed = ITERATIONS * 6 * LEVELS.length
    const staffIds = await sampleIds(client, true, needed)
    const noStaffIds = await sampleIds(client, false, needed)
    if (noStaffIds.length < needed || staffIds.length < needed)
      throw new Error(
        `${needed} appointments of each kind needed: fewer --iterations or levels, or a larger size`,
      )
    const levels: LevelRun[] = []
    for (const [l, level] of LEVELS.entries()) {
      log(`  ${level}`)
      await client.query(`SET default_transaction_isolation = '${level}'`)
      const latencies = await oneRowLatencies(client, statementsFor(shape, staffIds, noStaffIds, l))
      await client.query("SET default_transaction_isolation = 'read committed'")
      const throughput: Throughput[] = []
      for (const writers of WRITERS) {
        // openbook, plain, openbook, plain: the better of each pair's two rounds.
        const rounds = { openbook: [] as Concurrent[], plain: [] as Concurrent[] }
        for (let round = 0; round < 2; round++) {
          rounds.openbook.push(await concurrent(writers, '', round, l))
          rounds.plain.push(await concurrent(writers, 'plain_', round, l))
        }
        const best = (list: Concurrent[]) => list.reduce((a, b) => (b.perSecond > a.perSecond ? b : a))
        throughput.push({ writers, openbook: best(rounds.openbook), plain: best(rounds.plain) })
        log(
          `  ${writers} writers: ${best(rounds.openbook).perSecond.toFixed(0)} against ${best(rounds.plain).perSecond.toFixed(0)} writes/s`,
        )
      }
      // What the level's writers left, as they left it (no server folds here), and the pages beside it.
      const { rows } = await client.query<{ n: number }>('SELECT count(*)::int AS n FROM list_changes')
      const pending = { appointments: await pendingOf(client, ORG), all: rows[0]?.n ?? 0 }
      const pages = await timePages(client, ORG, ['0', 'mid', 'last'], pageDates(size, shape))
      log(`  ${pending.all} changes pending, the slowest page statement ${ms(slowest(pages))} ms`)
      const foldStarted = performance.now()
      const fold = await client.query<{ all_pending: string }>('SELECT * FROM list_fold_pending()')
      const folded = {
        ms: performance.now() - foldStarted,
        appointments: await pendingOf(client, ORG),
        all: Number(fold.rows[0]?.all_pending ?? 0),
        pages: await timePages(client, ORG, ['0', 'mid', 'last'], pageDates(size, shape)),
      }
      log(
        `  after one background fold: ${folded.all} pending, the slowest page statement ${ms(slowest(folded.pages))} ms`,
      )
      levels.push({ level, latencies, throughput, pending, pages, folded })
      // The next level starts from nothing pending, as this one did.
      await client.query('SELECT list_fold_all()')
    }
    const [firstLevel] = levels as [LevelRun]
    const folds = []
    for (const changes of [1_024, 5_000]) folds.push({ changes, ms: await foldCost(client, changes) })
    log(`  folds: ${folds.map((f) => `${f.changes} changes in ${ms(f.ms)} ms`).join(', ')}`)
    const bulk = await bulkWrites(client, 0)
    log(`  bulk: ${JSON.stringify(bulk)}`)
    // As the writers left openbook's tables (the folds' deleted changes and old bucket versions
    // still in their indexes: this cluster runs no autovacuum), then each time just vacuumed.
    const pages = []
    for (const vacuumed of [false, true])
      for (const changes of PENDING) {
        await leavePending(client, ORG, changes)
        if (vacuumed) await client.query('VACUUM list_changes, buckets, list_folds')
        pages.push({
          pending: await pendingOf(client, ORG),
          vacuumed,
          times: await timePages(client, ORG, ['0', 'mid', 'last'], pageDates(size, shape)),
        })
      }
    log(
      `  pages: ${pages.map((p) => `${p.pending} pending${p.vacuumed ? ' (vacuumed)' : ''}, at most ${ms(slowest(p.times))} ms`).join('; ')}`,
    )
    return {
      size,
      shape,
      latencies: firstLevel.latencies,
      throughput: firstLevel.throughput,
      levels,
      pendingAfter: firstLevel.pending.all,
      folds,
      bulk,
      pages,
    }
  })
}

const ms = (value: number) => value.toFixed(2)
const seconds = (t: Timed) => `${t.statement.toFixed(1)} + ${t.commit.toFixed(1)}`
const bulkLine = (name: string, b: { openbook: Timed; plain: Timed }) =>
  `| ${name} | ${seconds(b.openbook)} | ${seconds(b.plain)} | ${ratio(b.openbook.statement + b.openbook.commit, b.plain.statement + b.plain.commit)} |`
const ratio = (a: number, b: number) => (a / b).toFixed(2)

/** The lowest and highest of `values`, as `a-b×`. */
function span(values: number[]): string {
  const [low, high] = [Math.min(...values), Math.max(...values)]
  return `${low.toFixed(2)}-${high.toFixed(2)}×`
}

/** The run against the targets, in one paragraph. */
function summary(runs: Run[]): string {
  const latencies = runs.flatMap((run) => run.latencies)
  const p50 = latencies.map((l) => l.openbook.p50 / l.plain.p50)
  const p99 = latencies.map((l) => l.openbook.p99 / l.plain.p99)
  const writers = (n: number) =>
    runs.flatMap((run) =>
      run.throughput.filter((t) => t.writers === n).map((t) => t.openbook.perSecond / t.plain.perSecond),
    )
  const pending = runs.flatMap((run) => run.throughput.map((t) => t.openbook.pendingMost))
  // The slowest page statement at each level of PENDING, over all runs, as left and vacuumed.
  const pages = (vacuumed: boolean) =>
    PENDING.map((changes, i) => {
      const slowestMs = Math.max(
        ...runs.map((run) => slowest(run.pages.filter((p) => p.vacuumed === vacuumed)[i]?.times ?? [])),
      )
      return `${ms(slowestMs)} ms with ${changes.toLocaleString('en')}`
    }).join(', ')
  return [
    'Targets: p50 at most 1.5× and p99 at most 3× the plain table for every statement; 4 and 16 writers at least 0.5× its writes/s.',
    `This run: p50 ${span(p50)} and p99 ${span(p99)} over all ${latencies.length} rows;`,
    ...WRITERS.filter((n) => n > 1).map((n) => `${n} writers ${span(writers(n))};`),
    `the most changes pending at once ${Math.min(...pending).toLocaleString('en')}-${Math.max(...pending).toLocaleString('en')}.`,
    `The slowest page statement, by the changes pending beside it: ${pages(true)} just after a vacuum of openbook's tables;`,
    `${pages(false)} as the writers left them, unvacuumed.`,
  ].join(' ')
}

const LEVEL_NAMES: Record<string, string> = {
  'read committed': 'READ COMMITTED',
  'repeatable read': 'REPEATABLE READ',
  serializable: 'SERIALIZABLE',
}
/** The page statements' target: 5 ms (the largest organization's pages at half load). */
const PAGE_TARGET_MS = 5

/** Each level against the plain copies in the same level, in one paragraph. */
function levelSummary(runs: Run[]): string {
  return LEVELS.map((level) => {
    const of = runs.flatMap((run) => run.levels.filter((l) => l.level === level))
    const latencies = of.flatMap((l) => l.latencies)
    const writers = (n: number) =>
      of.flatMap((l) =>
        l.throughput.filter((t) => t.writers === n).map((t) => t.openbook.perSecond / t.plain.perSecond),
      )
    const retries = of.flatMap((l) => l.throughput.map((t) => t.openbook.retries))
    const pending = Math.max(...of.map((l) => l.pending.all))
    const page = Math.max(...of.map((l) => slowest(l.pages)))
    const foldedPending = Math.max(...of.map((l) => l.folded.all))
    const foldedPage = Math.max(...of.map((l) => slowest(l.folded.pages)))
    const within = (value: number) => (value <= PAGE_TARGET_MS ? 'within' : '**over**')
    return (
      `${LEVEL_NAMES[level]}: p50 ${span(latencies.map((l) => l.openbook.p50 / l.plain.p50))}, ` +
      `p99 ${span(latencies.map((l) => l.openbook.p99 / l.plain.p99))}; ` +
      WRITERS.filter((n) => n > 1)
        .map((n) => `${n} writers ${span(writers(n))}`)
        .join(', ') +
      `; ${Math.max(...retries)} serialization failures run again at most in a writers' round; ` +
      `${pending.toLocaleString('en')} changes pending after its writers, beside which the slowest page statement took ${ms(page)} ms ` +
      `(${within(page)} the ${PAGE_TARGET_MS} ms target); after one background fold ${foldedPending.toLocaleString('en')} pending and ` +
      `${ms(foldedPage)} ms (${within(foldedPage)}).`
    )
  }).join(' ')
}

/** A run's tables by level: one-row ratios, writers, and what each level's writers left pending. */
function levelTables(run: Run): string[] {
  const names = run.levels.map((l) => LEVEL_NAMES[l.level] ?? l.level)
  const cell = (l: Latency | undefined, q: 'p50' | 'p99') =>
    l ? `${ratio(l.openbook[q], l.plain[q])} (${ms(l.openbook[q])} / ${ms(l.plain[q])})` : '–'
  const first = run.levels[0]
  const lines = [
    `By isolation level, each against the plain copies in the same level: × (openbook ms / plain ms).`,
    '',
    `| one-row statement | ${names.map((n) => `${n} p50 | ${n} p99`).join(' | ')} |`,
    `|---|${names.map(() => '---:|---:').join('|')}|`,
    ...(first?.latencies ?? []).map(
      (l, i) =>
        `| ${l.name} | ${run.levels.map((level) => `${cell(level.latencies[i], 'p50')} | ${cell(level.latencies[i], 'p99')}`).join(' | ')} |`,
    ),
    '',
    '| level | writers | openbook writes/s (p99 ms) | plain writes/s (p99 ms) | × | serialization failures run again, openbook / plain | most changes pending |',
    '|---|---:|---:|---:|---:|---:|---:|',
    ...run.levels.flatMap((level) =>
      level.throughput.map(
        (t) =>
          `| ${LEVEL_NAMES[level.level]} | ${t.writers} | ${t.openbook.perSecond.toFixed(0)} (${ms(t.openbook.p99)}) | ${t.plain.perSecond.toFixed(0)} (${ms(t.plain.p99)}) | ${ratio(t.openbook.perSecond, t.plain.perSecond)} | ${t.openbook.retries} / ${t.plain.retries} | ${t.openbook.pendingMost} |`,
      ),
    ),
    '',
    "Changes pending once each level's writers are done (no server runs beside this bench), then after one background fold as a server runs it every second (`list_fold_pending()`, its time in the header); the page statements beside them, execution ms, median of 7, first / middle / last page:",
    '',
    `| page | ${run.levels.map((l) => `${LEVEL_NAMES[l.level]}: ${l.pending.all.toLocaleString('en')} pending (${l.pending.appointments.toLocaleString('en')} appointments) | after a fold of ${ms(l.folded.ms)} ms: ${l.folded.all.toLocaleString('en')} (${l.folded.appointments.toLocaleString('en')})`).join(' | ')} |`,
    `|---|${run.levels.map(() => '---:|---:').join('|')}|`,
    ...(first?.pages ?? []).map(
      (page, i) =>
        `| ${page.name} (${page.total.toLocaleString('en')}) | ${run.levels
          .map((l) =>
            [l.pages[i], l.folded.pages[i]]
              .map((p) => (p?.cells ?? []).map((c) => ms(c.ms)).join(' / '))
              .join(' | '),
          )
          .join(' | ')} |`,
    ),
    '',
  ]
  return lines
}

function render(runs: Run[], machine: string): string {
  const lines = [
    RC_ONLY ? '## Writer cost' : '## Writer cost by isolation level',
    '',
    `Command: \`npm run bench:writer -- --sizes ${values.sizes} --shapes ${values.shapes} --large-shapes ${values['large-shapes']} --iterations ${ITERATIONS} --seconds ${SECONDS} --isolation '${LEVELS.join(',')}'\`. ${machine}`,
    '',
    "Each one-row statement alone in autocommit (synchronous_commit off), on openbook's tables and on plain copies (same columns, checks, indexes and foreign keys, no trigger), alternating; client-side time in ms through node-postgres. Then 1, 4 and 16 writers of one organization: 40 % appointment inserts, 40 % status changes, 20 % customer inserts.",
    '',
    summary(runs),
    '',
    ...(RC_ONLY
      ? []
      : [
          `Each one-row statement and each writers' round also ran in ${LEVELS.map((l) => LEVEL_NAMES[l]).join(', ')} (\`default_transaction_isolation\`, on both tables): under each size, its tables by level, then the first level's in full. ` +
            levelSummary(runs),
          '',
        ]),
  ]
  for (const run of runs) {
    lines.push(`### ${run.size.toLocaleString('en')} appointments, ${run.shape}`, '')
    if (!RC_ONLY) lines.push(...levelTables(run), `${LEVEL_NAMES[LEVELS[0] ?? '']} in full:`, '')
    lines.push('| one-row statement | p50 openbook | p50 plain | × | p99 openbook | p99 plain | × |')
    lines.push('|---|---:|---:|---:|---:|---:|---:|')
    for (const l of run.latencies)
      lines.push(
        `| ${l.name} | ${ms(l.openbook.p50)} | ${ms(l.plain.p50)} | ${ratio(l.openbook.p50, l.plain.p50)} | ${ms(l.openbook.p99)} | ${ms(l.plain.p99)} | ${ratio(l.openbook.p99, l.plain.p99)} |`,
      )
    lines.push(
      '',
      '| writers of one organization | openbook writes/s (p99 ms) | plain writes/s (p99 ms) | × | most changes pending |',
    )
    lines.push('|---:|---:|---:|---:|---:|')
    for (const t of run.throughput)
      lines.push(
        `| ${t.writers} | ${t.openbook.perSecond.toFixed(0)} (${ms(t.openbook.p99)}) | ${t.plain.perSecond.toFixed(0)} (${ms(t.plain.p99)}) | ${ratio(t.openbook.perSecond, t.plain.perSecond)} | ${t.openbook.pendingMost} |`,
      )
    lines.push(
      '',
      `Changes pending after the run: ${run.pendingAfter}. ` +
        `A fold, timed alone: ${run.folds.map((f) => `${f.changes.toLocaleString('en')} changes in ${ms(f.ms)} ms`).join(', ')} ` +
        '(at the commit of the one entry written in 512 that runs it; 1,024 changes are 512 status changes).',
      '',
      `A bulk write in one transaction, ${BULK_ROWS.toLocaleString('en')} appointments into a new organization, in s (statement + commit):`,
      '',
      '| bulk write | openbook | plain | × |',
      '|---|---:|---:|---:|',
      bulkLine('one INSERT', run.bulk.insert),
      bulkLine('one UPDATE of their status', run.bulk.update),
      '',
      "The page statements with changes pending beside them (the organization's appointments folded, then status changes written where no fold runs), execution ms, median of 7, first / middle / last page; as the writers above left openbook's tables, then just after a `VACUUM` of them:",
      '',
      `| page | ${run.pages.map((p) => `${p.pending.toLocaleString('en')} pending${p.vacuumed ? ', vacuumed' : ''}`).join(' | ')} |`,
      `|---|${run.pages.map(() => '---:').join('|')}|`,
      ...(run.pages[0]?.times ?? []).map(
        (page, i) =>
          `| ${page.name} (${page.total.toLocaleString('en')}) | ${run.pages.map((p) => (p.times[i]?.cells ?? []).map((c) => ms(c.ms)).join(' / ')).join(' | ')} |`,
      ),
      '',
    )
  }
  return lines.join('\n')
}

const runs: Run[] = []
for (const size of SIZES)
  for (const shape of SHAPES) {
    if (size === Math.max(...SIZES) && SIZES.length > 1 && !LARGE_SHAPES.has(shape)) continue
    runs.push(await measure(size, shape))
  }
await withClient(`${SERVER}/postgres`, (client) =>
  client.query(`DROP DATABASE IF EXISTS ${values.db} WITH (FORCE)`),
)
const cpus = (await import('node:os')).cpus()
const machine = `${cpus.length} × ${cpus[0]?.model ?? 'CPU'}, PostgreSQL on the same cores.`
const report = render(runs, machine)
process.stdout.write(`${report}\n`)
// Only READ COMMITTED: the writer section as it always was; more levels: a section of their own beside it.
if (!values['no-write']) writeResultsSection(RC_ONLY ? 'writer' : 'writer-isolation', report)
