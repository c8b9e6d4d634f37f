/**
 * npm run bench:soak: a salon software's writes for a bounded time, at a set rate, beside the
 * real server (dist/server.js, its background fold running) and pages read through HTTP; every
 * `--report-every` minutes one row of openbook's tables' sizes (list_changes, buckets,
 * list_folds, with their indexes) beside the data's, dead tuples, autovacuum runs, the changes
 * pending and the pages' latency; then a verdict from the rows (bench/soak-report.ts).
 *
 * One organization of `--big` appointments and many small ones, seeded with `openbook seed`. The
 * writes: every kind a booking application makes, one to four rows a transaction, a share
 * SERIALIZABLE and REPEATABLE READ (which never fold at their commit), serialization failures
 * run again as an application would, and counted.
 */
import { cpus, loadavg } from 'node:os'
import { performance } from 'node:perf_hooks'
import { setTimeout as sleep } from 'node:timers/promises'
import { parseArgs } from 'node:util'
import pg from 'pg'
import { assertLoopbackUrl } from './options.js'
import { runFromRoot } from './paths.js'
import { runOk } from './proc.js'
import { writeResultsSection } from './report.js'
import { startOpenbook } from './servers.js'
import {
  DATA_TABLES,
  OPENBOOK_TABLES,
  percentile,
  type SoakRow,
  soakTable,
  soakVerdict,
  type TableName,
  type TableStats,
} from './soak-report.js'
import { withDatabase } from './sync-setup.js'

runFromRoot()

const { values } = parseArgs({
  options: {
    pg: { type: 'string', default: process.env.BENCH_PG_URL ?? 'postgres://root@127.0.0.1:5432' },
    db: { type: 'string', default: 'openbook_bench_soak' },
    minutes: { type: 'string', default: '30' },
    'report-every': { type: 'string', default: '5' },
    // Write transactions a second, the same all run long so that the first interval and the last compare.
    rate: { type: 'string', default: '40' },
    // Pages read a second through HTTP.
    reads: { type: 'string', default: '4' },
    big: { type: 'string', default: '200000' },
    'small-orgs': { type: 'string', default: '40' },
    'small-appointments': { type: 'string', default: '40000' },
    // Shares of the transactions run SERIALIZABLE and REPEATABLE READ; the rest READ COMMITTED.
    serializable: { type: 'string', default: '0.25' },
    'repeatable-read': { type: 'string', default: '0.15' },
    'no-write': { type: 'boolean', default: false },
    'keep-db': { type: 'boolean', default: false },
    help: { type: 'boolean', default: false },
  },
})
if (values.help) {
  process.stdout.write(
    'npm run bench:soak -- [--minutes 30] [--report-every 5] [--rate 40] [--reads 4] [--big 200000] ' +
      '[--small-orgs 40] [--small-appointments 40000] [--serializable 0.25] [--repeatable-read 0.15] ' +
      '[--no-write] [--keep-db] [--pg URL] [--db NAME]\n',
  )
  process.exit(0)
}
assertLoopbackUrl(values.pg)
if (!/^[a-z_][a-z0-9_]{0,62}$/.test(values.db)) throw new Error('--db must be a plain lowercase identifier')
const SERVER = values.pg.replace(/\/+$/, '')
const DATABASE_URL = `${SERVER}/${values.db}`
const MINUTES = Number(values.minutes)
const EVERY = Number(values['report-every'])
const RATE = Number(values.rate)
const READS = Number(values.reads)
const BIG = Number(values.big)
const SERIALIZABLE = Number(values.serializable)
const REPEATABLE = Number(values['repeatable-read'])
for (const [name, value] of Object.entries({ MINUTES, EVERY, RATE, READS, BIG }))
  if (!(value > 0)) throw new Error(`${name.toLowerCase()} must be a positive number`)
const WRITERS = 8
const log = (line: string) => process.stderr.write(`${line}\n`)

interface Org {
  readonly id: string
  readonly appointments: string[]
  readonly customers: string[]
  /** Customers this run made: the only ones it deletes (no appointment points at them). */
  readonly newCustomers: string[]
  readonly staff: string[]
  readonly services: string[]
  readonly from: number
  readonly to: number
}

async function seedAll(): Promise<{ big: string; small: string[] }> {
  await withDatabase(`${SERVER}/postgres`, async (client) => {
    await client.query(`DROP DATABASE IF EXISTS ${values.db} WITH (FORCE)`)
    await client.query(`CREATE DATABASE ${values.db}`)
  })
  const env = { ...process.env, DATABASE_URL }
  const cli = async <T>(args: readonly string[]): Promise<T> =>
    JSON.parse(
      (await runOk(process.execPath, ['bin/openbook.js', ...args, '--json'], { env, timeoutMs: 1_200_000 }))
        .stdout,
    ) as T
  await cli(['migrate'])
  const big = await cli<{ orgIds: string[] }>([
    'seed',
    ...[
      '--orgs',
      '1',
      '--customers',
      String(Math.ceil(BIG / 4)),
      '--appointments',
      String(BIG),
      '--seed',
      '7',
    ],
  ])
  const smallAppointments = Number(values['small-appointments'])
  const small = await cli<{ orgIds: string[] }>([
    'seed',
    ...['--orgs', values['small-orgs'], '--customers', String(Math.ceil(smallAppointments / 2))],
    ...['--appointments', String(smallAppointments), '--seed', '8'],
  ])
  await withDatabase(DATABASE_URL, async (client) => {
    await client.query("UPDATE organizations SET plan = 'enterprise'")
    await client.query('VACUUM ANALYZE')
  })
  return { big: String(big.orgIds[0]), small: small.orgIds.map(String) }
}

async function keyOf(orgId: string): Promise<string> {
  const env = { ...process.env, DATABASE_URL }
  const owner = await withDatabase(DATABASE_URL, async (client) => {
    const { rows } = await client.query<{ email: string }>(
      `SELECT u.email FROM memberships m JOIN users u ON u.id = m.user_id WHERE m.org_id = $1 AND m.role = 'owner' LIMIT 1`,
      [orgId],
    )
    return String(rows[0]?.email)
  })
  const { stdout } = await runOk(
    process.execPath,
    ['bin/openbook.js', 'keys', 'create', '--org', orgId, '--as', owner, '--env', 'test', '--json'],
    { env },
  )
  return String((JSON.parse(stdout) as { key: string }).key)
}

async function loadOrg(client: pg.Client, id: string): Promise<Org> {
  const column = async (sql: string) => (await client.query<{ v: string }>(sql, [id])).rows.map((r) => r.v)
  const { rows } = await client.query<{ a: Date; b: Date }>(
    'SELECT min(start_at) AS a, max(start_at) AS b FROM appointments WHERE org_id = $1',
    [id],
  )
  return {
    id,
    appointments: await column('SELECT id AS v FROM appointments WHERE org_id = $1'),
    customers: await column('SELECT id AS v FROM customers WHERE org_id = $1'),
    newCustomers: [],
    staff: await column('SELECT id AS v FROM staff WHERE org_id = $1'),
    services: await column('SELECT id AS v FROM services WHERE org_id = $1'),
    from: rows[0]?.a.getTime() ?? Date.now(),
    to: rows[0]?.b.getTime() ?? Date.now(),
  }
}

const pick = <T>(list: readonly T[]): T | undefined => list[Math.floor(Math.random() * list.length)]
/** Removes a random element and returns it (order does not matter). */
function take<T>(list: T[]): T | undefined {
  if (list.length === 0) return undefined
  const i = Math.floor(Math.random() * list.length)
  const value = list[i] as T
  list[i] = list.at(-1) as T
  list.pop()
  return value
}

const STATUSES = ['scheduled', 'confirmed', 'checked_in', 'no_show', 'cancelled', 'completed']
type Statement = { sql: string; params: unknown[] } | undefined
let made = 0

/** The write kinds of a booking application, by weight (out of 100). */
const KINDS: [number, string, (org: Org) => Statement][] = [
  [
    25,
    'appointment insert',
    (org) => {
      const at = new Date(org.from + Math.random() * (org.to - org.from))
      const id = `apt_soak_${++made}`
      org.appointments.push(id)
      return {
        sql: `INSERT INTO appointments (org_id, id, customer_id, staff_id, service_id, start_at, end_at, status,
                price_cents, is_active, created_at, updated_at)
              VALUES ($1, $2, $3, $4, $5, $6, $6::timestamptz + interval '45 minutes', 'scheduled', 4500, true, now(), now())`,
        params: [org.id, id, pick(org.customers), pick(org.staff), pick(org.services), at.toISOString()],
      }
    },
  ],
  [
    25,
    'status change',
    (org) => ({
      sql: 'UPDATE appointments SET status = $3, updated_at = now() WHERE org_id = $1 AND id = $2',
      params: [org.id, pick(org.appointments), pick(STATUSES)],
    }),
  ],
  [
    12,
    'start move',
    (org) => ({
      sql: `UPDATE appointments SET start_at = start_at + $3::int * interval '1 hour',
              end_at = end_at + $3::int * interval '1 hour', updated_at = now() WHERE org_id = $1 AND id = $2`,
      params: [org.id, pick(org.appointments), Math.floor(Math.random() * 97) - 48],
    }),
  ],
  [
    10,
    'note',
    (org) => ({
      sql: 'UPDATE appointments SET note = $3, updated_at = now() WHERE org_id = $1 AND id = $2',
      params: [org.id, pick(org.appointments), `note ${made}`],
    }),
  ],
  [
    5,
    'deactivation',
    (org) => ({
      sql: 'UPDATE appointments SET is_active = false, updated_at = now() WHERE org_id = $1 AND id = $2',
      params: [org.id, pick(org.appointments)],
    }),
  ],
  [
    3,
    'delete',
    (org) => ({
      sql: 'DELETE FROM appointments WHERE org_id = $1 AND id = $2',
      params: [org.id, take(org.appointments)],
    }),
  ],
  [
    8,
    'customer insert',
    (org) => {
      const id = `cus_soak_${++made}`
      org.newCustomers.push(id)
      return {
        sql: `INSERT INTO customers (org_id, id, first_name, last_name, is_active, created_at, updated_at)
              VALUES ($1, $2, 'New', 'Customer', true, now(), now())`,
        params: [org.id, id],
      }
    },
  ],
  [
    7,
    'customer update',
    (org) => ({
      sql: 'UPDATE customers SET first_name = $3, updated_at = now() WHERE org_id = $1 AND id = $2',
      params: [org.id, pick(org.customers), `Renamed ${made}`],
    }),
  ],
  [
    3,
    'customer deactivation',
    (org) => ({
      sql: 'UPDATE customers SET is_active = false, updated_at = now() WHERE org_id = $1 AND id = $2',
      params: [org.id, pick(org.customers)],
    }),
  ],
  [
    2,
    'customer delete',
    (org) => {
      const id = take(org.newCustomers)
      return id
        ? { sql: 'DELETE FROM customers WHERE org_id = $1 AND id = $2', params: [org.id, id] }
        : undefined
    },
  ],
]

function statementFor(org: Org): Statement {
  let r = Math.random() * 100
  for (const [weight, , make] of KINDS) {
    if (r < weight) return make(org)
    r -= weight
  }
  return undefined
}

const counts = { writes: 0, retries: 0, errors: 0, late: 0 }
const errorSamples = new Set<string>()

/** One transaction of one to four rows of one organization, run again on a serialization failure. */
async function transaction(client: pg.Client, org: Org): Promise<void> {
  const r = Math.random()
  const level =
    r < SERIALIZABLE ? 'SERIALIZABLE' : r < SERIALIZABLE + REPEATABLE ? 'REPEATABLE READ' : 'READ COMMITTED'
  const rows = Math.random() < 0.8 ? 1 : 2 + Math.floor(Math.random() * 3)
  const statements = Array.from({ length: rows }, () => statementFor(org)).filter(
    (s): s is NonNullable<Statement> => s !== undefined,
  )
  for (let attempt = 0; ; attempt++) {
    try {
      await client.query(`BEGIN ISOLATION LEVEL ${level}`)
      for (const s of statements) await client.query(s.sql, s.params)
      await client.query('COMMIT')
      counts.writes++
      return
    } catch (error) {
      await client.query('ROLLBACK').catch(() => undefined)
      const code = (error as { code?: string }).code
      if ((code === '40001' || code === '40P01') && attempt < 20) {
        counts.retries++
        await sleep(5 + Math.random() * 20 * (attempt + 1))
        continue
      }
      counts.errors++
      // The code and the constraint only: a row's values stay out of the output.
      const constraint = (error as { constraint?: string }).constraint ?? ''
      if (errorSamples.size < 10) errorSamples.add(`${code} ${constraint}`.trim())
      return
    }
  }
}

/** Paced writes until `until` (performance.now()): RATE transactions a second over WRITERS connections. */
async function writeLoad(big: Org, small: Org[], until: number): Promise<void> {
  const free: pg.Client[] = []
  for (let i = 0; i < WRITERS; i++) {
    const client = new pg.Client({
      connectionString: `${DATABASE_URL}?application_name=openbook-soak-writer`,
    })
    await client.connect()
    free.push(client)
  }
  const waiting: ((client: pg.Client) => void)[] = []
  const acquire = () =>
    new Promise<pg.Client>((resolve) => {
      const client = free.pop()
      if (client) resolve(client)
      else waiting.push(resolve)
    })
  const release = (client: pg.Client) => {
    const next = waiting.shift()
    if (next) next(client)
    else free.push(client)
  }
  const started = performance.now()
  const running = new Set<Promise<void>>()
  for (let i = 0; ; i++) {
    const due = started + (i * 1000) / RATE
    if (due >= until) break
    const now = performance.now()
    if (due > now) await sleep(due - now)
    else if (now - due > 1000) counts.late++
    const org = Math.random() < 0.7 ? big : (pick(small) as Org)
    const job = acquire().then(async (client) => {
      try {
        await transaction(client, org)
      } finally {
        release(client)
      }
    })
    running.add(job)
    void job.finally(() => running.delete(job))
  }
  await Promise.all(running)
  await Promise.all(free.map((client) => client.end()))
}

interface Reader {
  readonly key: string
  readonly staffId: string
}

/** Pages through HTTP at READS a second: both lists, by status and by staff, first, middle and last. */
async function readLoad(baseUrl: string, readers: Reader[], until: number, latencies: number[]) {
  const shapes = readers.flatMap((reader) =>
    [
      'customers?',
      'appointments?',
      'appointments?status=completed&',
      `appointments?staffId=${reader.staffId}&`,
    ].map((path) => ({ reader, path, total: 0 })),
  )
  const started = performance.now()
  const pending = new Set<Promise<void>>()
  for (let i = 0; ; i++) {
    const due = started + (i * 1000) / READS
    if (due >= until) break
    const now = performance.now()
    if (due > now) await sleep(due - now)
    const shape = shapes[i % shapes.length] as (typeof shapes)[number]
    const where = Math.floor(i / shapes.length) % 3
    const last = Math.max(0, Math.floor((shape.total - 1) / 50) * 50)
    const offset = where === 0 ? 0 : where === 1 ? Math.floor(last / 100) * 50 : last
    const request = (async () => {
      const t = performance.now()
      const response = await fetch(`${baseUrl}/api/public/v1/${shape.path}limit=50&offset=${offset}`, {
        headers: { authorization: `Bearer ${shape.reader.key}` },
      })
      const body = (await response.json()) as { pagination?: { total?: number } }
      if (response.status !== 200) {
        readErrors++
        return
      }
      latencies.push(performance.now() - t)
      shape.total = body.pagination?.total ?? shape.total
    })().catch(() => {
      readErrors++
    })
    pending.add(request)
    void request.finally(() => pending.delete(request))
  }
  await Promise.all(pending)
}
let readErrors = 0

async function snapshot(client: pg.Client, minutes: number, latencies: number[]): Promise<SoakRow> {
  const names = [...OPENBOOK_TABLES, ...DATA_TABLES]
  const { rows } = await client.query<{
    relname: TableName
    t: string
    i: string
    dead: string
    av: string
  }>(
    `SELECT relname, pg_table_size(relid) AS t, pg_indexes_size(relid) AS i, n_dead_tup AS dead, autovacuum_count AS av
     FROM pg_stat_user_tables WHERE schemaname = 'public' AND relname = ANY($1)`,
    [names],
  )
  const tables = Object.fromEntries(
    rows.map((r) => [
      r.relname,
      {
        table: Number(r.t),
        indexes: Number(r.i),
        dead: Number(r.dead),
        autovacuums: Number(r.av),
      } as TableStats,
    ]),
  ) as Record<TableName, TableStats>
  const pending = await client.query<{ total: number; most: number }>(
    `SELECT coalesce(sum(n), 0)::int AS total, coalesce(max(n), 0)::int AS most
     FROM (SELECT count(*) AS n FROM list_changes GROUP BY org_id, list) p`,
  )
  const sorted = latencies.splice(0).sort((a, b) => a - b)
  return {
    minutes,
    writes: counts.writes,
    retries: counts.retries,
    errors: counts.errors,
    tables,
    pendingTotal: pending.rows[0]?.total ?? 0,
    pendingMost: pending.rows[0]?.most ?? 0,
    p50: sorted.length ? percentile(sorted, 0.5) : null,
    p99: sorted.length ? percentile(sorted, 0.99) : null,
    pages: sorted.length,
    load1: loadavg()[0] ?? 0,
  }
}

async function main(): Promise<void> {
  const seedStarted = performance.now()
  log(`seeding ${BIG} appointments in one organization and ${values['small-orgs']} small ones`)
  const { big: bigId, small: smallIds } = await seedAll()
  const seedSeconds = (performance.now() - seedStarted) / 1000
  log(`seeded in ${seedSeconds.toFixed(0)} s`)
  const monitor = new pg.Client({ connectionString: DATABASE_URL })
  await monitor.connect()
  const settings = (
    await monitor.query<{ v: string; av: string; sb: string }>(
      "SELECT split_part(version(), ' on ', 1) AS v, current_setting('autovacuum') AS av, current_setting('shared_buffers') AS sb",
    )
  ).rows[0]
  if (settings?.av !== 'on')
    log('autovacuum is off on this server: its dead tuples stay, the rows will show it')
  const big = await loadOrg(monitor, bigId)
  const small: Org[] = []
  for (const id of smallIds) small.push(await loadOrg(monitor, id))
  const data = (
    await monitor.query<{ orgs: number; a: number; c: number }>(
      'SELECT (SELECT count(*) FROM organizations)::int AS orgs, (SELECT count(*) FROM appointments)::int AS a, (SELECT count(*) FROM customers)::int AS c',
    )
  ).rows[0]
  // Pages of the big organization and of two small ones (the smallest and a middle one).
  const bySize = [...small].sort((a, b) => a.appointments.length - b.appointments.length)
  const readOrgs = [big, bySize[0], bySize[Math.floor(bySize.length / 2)]].filter((o): o is Org => !!o)
  const readers: Reader[] = []
  for (const org of readOrgs) readers.push({ key: await keyOf(org.id), staffId: org.staff[0] ?? '' })
  const server = await startOpenbook('soak', '.', DATABASE_URL)
  log(`server at ${server.baseUrl}; ${RATE} writes/s and ${READS} pages/s for ${MINUTES} min`)
  const rows: SoakRow[] = []
  const latencies: number[] = []
  const printRow = (row: SoakRow) => log(soakTable([row]).at(-1) as string)
  log(soakTable([]).join('\n'))
  const first = await snapshot(monitor, 0, latencies)
  rows.push(first)
  printRow(first)
  const started = performance.now()
  const until = started + MINUTES * 60_000
  const work = Promise.all([
    writeLoad(big, small, until),
    readLoad(server.baseUrl, readers, until, latencies),
  ])
  let done = false
  void work.finally(() => {
    done = true
  })
  for (let k = 1; k * EVERY <= MINUTES + 1e-9; k++) {
    const at = started + k * EVERY * 60_000
    while (performance.now() < at && !done) await sleep(Math.min(1000, at - performance.now()))
    if (k * EVERY > MINUTES - 1e-9) await work
    const row = await snapshot(monitor, (performance.now() - started) / 60_000, latencies)
    rows.push(row)
    printRow(row)
  }
  await work
  await server.service.stop()
  await monitor.end()
  const verdict = soakVerdict(rows)
  const machine = `${cpus().length} × ${cpus()[0]?.model.trim() ?? 'CPU'}, ${settings?.v} (shared_buffers ${settings?.sb}, autovacuum ${settings?.av}, its other settings the defaults), the server, the writers, the readers and PostgreSQL on the same cores`
  const report = [
    '## Hours of writes (soak)',
    '',
    `Command: \`npm run bench:soak -- --minutes ${MINUTES} --report-every ${EVERY} --rate ${RATE} --reads ${READS} --big ${BIG} --small-orgs ${values['small-orgs']} --small-appointments ${values['small-appointments']}\`. ${machine}.`,
    '',
    `Data: \`openbook seed\` of one organization of ${BIG.toLocaleString('en')} appointments and ${values['small-orgs']} small ones (${data?.orgs} organizations, ` +
      `${data?.a.toLocaleString('en')} appointments, ${data?.c.toLocaleString('en')} customers in all), seeded in ${seedSeconds.toFixed(0)} s. ` +
      `Writes: ${RATE} transactions a second (70 % in the big organization), one row in 80 % of them and 2-4 in the rest; ` +
      `${Math.round(SERIALIZABLE * 100)} % SERIALIZABLE, ${Math.round(REPEATABLE * 100)} % REPEATABLE READ, the rest READ COMMITTED; ` +
      `kinds by weight: ${KINDS.map(([w, name]) => `${name} ${w}`).join(', ')}. ` +
      `Serialization failures and deadlocks rolled back and run again (the retries column). ` +
      `Reads: ${READS} pages a second through HTTP (\`node dist/server.js\`, background fold every second), customers, appointments, ` +
      `\`status=completed\` and \`staffId\`, first, middle and last page in turn, of the big organization and two small ones. ` +
      `Sizes in MB as table + indexes (\`pg_table_size\`, \`pg_indexes_size\`); dead tuples and autovacuum runs from \`pg_stat_user_tables\`; ` +
      'pending: rows of list_changes, and of the list that has the most; p50 / p99 of the pages answered in the interval.',
    '',
    ...soakTable(rows),
    '',
    `Transactions that failed for another reason: ${counts.errors}${errorSamples.size ? ` (${[...errorSamples].join('; ')})` : ''}; ` +
      `page requests that failed: ${readErrors}; writes started more than a second late: ${counts.late}.`,
    '',
    ...verdict.lines,
    '',
  ].join('\n')
  process.stdout.write(`${report}\n`)
  if (!values['no-write']) writeResultsSection('soak', report)
  if (!values['keep-db'])
    await withDatabase(`${SERVER}/postgres`, (client) =>
      client.query(`DROP DATABASE IF EXISTS ${values.db} WITH (FORCE)`),
    )
}

await main()
