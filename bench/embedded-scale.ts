/**
 * The embedded store at an operator's size: `openbook seed` of one organization into a new
 * DATA_DIR, then the built server's first start and a restart, and an hour of a booking
 * application's writes (20 a second: 72,000, run as fast as the store takes them, through SQL on
 * the store with the server's own autovacuum), each followed by the pages (first, middle and last
 * of customers and appointments, 7 requests each, one at a time).
 *
 *   npm run build && npm run bench:embedded -- --scale 1000000,300000 [--writes 72000] [--write]
 *
 * `--scale APPOINTMENTS,CUSTOMERS`; `--write` puts the table into bench/RESULTS.md between the
 * `embedded-scale-APPOINTMENTS` markers (a section of its own for each size).
 */
import { spawn } from 'node:child_process'
import { mkdtempSync, readdirSync, rmSync, statSync } from 'node:fs'
import { cpus, tmpdir } from 'node:os'
import { join } from 'node:path'
import { setTimeout as sleep } from 'node:timers/promises'
import { parseArgs } from 'node:util'
import { buildApp } from '../src/app.js'
import { createApiKey } from '../src/domain/api-keys.js'
import { createEmbeddedStore } from '../src/store/embedded/embedded.js'
import type { MaintenanceRun } from '../src/store/embedded/embedded-autovacuum.js'
import { runFromRoot } from './paths.js'
import { freePort, loadAverageText, type Service, startService, statusKb } from './proc.js'
import { writeResultsSection } from './report.js'

runFromRoot()

const { values } = parseArgs({
  options: {
    scale: { type: 'string', default: '1000000,300000' },
    writes: { type: 'string', default: '72000' },
    requests: { type: 'string', default: '7' },
    write: { type: 'boolean', default: false },
    // The writes without the store's autovacuum, as before it had one (not for --write).
    'no-autovacuum': { type: 'boolean', default: false },
  },
})
const [APPOINTMENTS, CUSTOMERS] = values.scale.split(',').map(Number) as [number, number]
const WRITES = Number(values.writes)
const REQUESTS = Number(values.requests)
const PAGE = 100
const log = (line: string) => process.stderr.write(`[${new Date().toISOString().slice(11, 19)}] ${line}\n`)
const mb = (kb: number) => Math.round(kb / 1024)

/** A command to its end, with its peak RSS (sampled from /proc every 100 ms). */
async function runMeasured(args: readonly string[], env: NodeJS.ProcessEnv) {
  const started = performance.now()
  const child = spawn(process.execPath, args, { env, stdio: ['ignore', 'pipe', 'pipe'] })
  let stderr = ''
  child.stderr.setEncoding('utf8').on('data', (chunk: string) => {
    stderr = (stderr + chunk).slice(-4_000)
  })
  child.stdout.resume()
  let peakKb = 0
  const sampler = setInterval(() => {
    if (child.pid) peakKb = Math.max(peakKb, statusKb(child.pid, 'VmHWM'))
  }, 100)
  const code = await new Promise<number | null>((resolve) => child.on('close', resolve))
  clearInterval(sampler)
  if (code !== 0) throw new Error(`${args.join(' ')} exited ${code}: ${stderr.trim().split('\n').pop()}`)
  return { seconds: (performance.now() - started) / 1000, peakMb: mb(peakKb) }
}

function directoryBytes(dir: string): number {
  let total = 0
  for (const entry of readdirSync(dir, { withFileTypes: true })) {
    const path = join(dir, entry.name)
    total += entry.isDirectory() ? directoryBytes(path) : entry.isFile() ? statSync(path).size : 0
  }
  return total
}

interface Org {
  readonly id: string
  readonly key: string
}

/** The seeded organization and a key of it, made in this process while no server holds DATA_DIR. */
async function keyOf(dataDir: string): Promise<Org> {
  const store = await createEmbeddedStore(dataDir, { shortLived: true, autovacuum: false })
  try {
    return await store.admin(async (sql) => {
      const [org] = await sql.query<{ id: string; email: string }>(
        `SELECT m.org_id AS id, u.email FROM memberships m JOIN users u ON u.id = m.user_id
         WHERE m.role = 'owner' ORDER BY m.org_id LIMIT 1`,
      )
      if (!org) throw new Error('the seeded DATA_DIR has no organization')
      const created = await createApiKey(sql, {
        orgId: org.id,
        actorEmail: org.email,
        env: 'test',
        brand: 'svc',
      })
      return { id: org.id, key: created.key }
    })
  } finally {
    await store.close()
  }
}

const PAGES = [
  ['customers', 'first', 0],
  ['customers', 'middle', Math.floor(CUSTOMERS / 2)],
  ['customers', 'last', CUSTOMERS - PAGE],
  ['appointments', 'first', 0],
  ['appointments', 'middle', Math.floor(APPOINTMENTS / 2)],
  ['appointments', 'last', APPOINTMENTS - PAGE],
] as const

interface PageTime {
  readonly label: string
  readonly firstMs: number
  readonly medianMs: number
}

/** Answers a page's request: its status, once its body has been read. */
type Get = (path: string) => Promise<number>

async function timePages(get: Get): Promise<PageTime[]> {
  const times: PageTime[] = []
  for (const [list, where, offset] of PAGES) {
    const path = `/api/public/v1/${list}?limit=${PAGE}${offset ? `&offset=${offset}` : ''}`
    const samples: number[] = []
    for (let i = 0; i < REQUESTS; i++) {
      const started = performance.now()
      const status = await get(path)
      samples.push(performance.now() - started)
      if (status !== 200) throw new Error(`${path} answered ${status}`)
    }
    const sorted = [...samples].sort((a, b) => a - b)
    times.push({
      label: `${list} ${where}`,
      firstMs: samples[0] ?? 0,
      medianMs: sorted[Math.floor(sorted.length / 2)] ?? 0,
    })
  }
  return times
}

interface ServerRun {
  readonly startSeconds: number
  readonly pages: PageTime[]
  readonly rssMb: number
  readonly peakMb: number
}

/** The built server on DATA_DIR: from its spawn to the first page answered, then every page. */
async function serve(dataDir: string, org: Org): Promise<ServerRun> {
  const port = await freePort()
  const started = performance.now()
  let service: Service | undefined
  try {
    service = await startService(
      process.execPath,
      ['dist/server.js'],
      {
        PATH: process.env.PATH,
        HOME: process.env.HOME,
        DATA_DIR: dataDir,
        PORT: String(port),
        HOST: '127.0.0.1',
      },
      port,
      120_000,
    )
    const base = `http://127.0.0.1:${port}`
    for (;;) {
      const response = await fetch(`${base}/api/public/v1/customers?limit=1`, {
        headers: { authorization: `Bearer ${org.key}` },
      })
      await response.arrayBuffer()
      if (response.status === 200) break
      // Only a store still preparing is waited for: a refused key would never pass.
      if (response.status !== 503) throw new Error(`the first page answered ${response.status}`)
      await sleep(20)
    }
    const startSeconds = (performance.now() - started) / 1000
    const pages = await timePages(async (path) => {
      const response = await fetch(base + path, { headers: { authorization: `Bearer ${org.key}` } })
      await response.arrayBuffer()
      return response.status
    })
    return {
      startSeconds,
      pages,
      rssMb: mb(statusKb(service.pid, 'VmRSS')),
      peakMb: mb(statusKb(service.pid, 'VmHWM')),
    }
  } finally {
    await service?.stop()
  }
}

interface WriteRun {
  readonly seconds: number
  readonly maintenance: MaintenanceRun[]
  /** The pages through the app in the writing process, after the writes and its looks. */
  readonly pages: PageTime[]
}

/**
 * An hour of a booking application's writes, one statement a transaction, as fast as the store
 * takes them: 40 % appointments booked, 40 % status changes, 20 % customers renamed. The store is
 * opened as the server opens it, with its autovacuum on.
 */
async function writeAnHour(dataDir: string, org: Org): Promise<WriteRun> {
  const maintenance: MaintenanceRun[] = []
  const store = await createEmbeddedStore(dataDir, {
    shortLived: true,
    autovacuum: values['no-autovacuum'] ? false : { onRun: (run) => maintenance.push(run) },
  })
  try {
    const [appointments, customers, staff] = await store.admin(async (sql) =>
      Promise.all(
        ['appointments', 'customers', 'staff'].map(async (table) =>
          (
            await sql.query<{ id: string }>(
              `SELECT id FROM ${table} WHERE org_id = $1 ORDER BY id LIMIT 20000`,
              [org.id],
            )
          ).map((row) => row.id),
        ),
      ),
    )
    const pick = (ids: readonly string[] | undefined, i: number) => ids?.[(i * 7919) % ids.length] ?? ''
    const started = performance.now()
    for (let i = 0; i < WRITES; i++) {
      const kind = i % 5
      await store.admin((sql) =>
        kind < 2
          ? sql.query(
              `INSERT INTO appointments (org_id, id, staff_id, start_at, end_at, status, is_active, created_at, updated_at)
               VALUES ($1, $2, $3, now() + make_interval(hours => $4::int), now() + make_interval(hours => $4::int + 1),
                       'scheduled', true, now(), now())`,
              [org.id, `apt_hour_${i}`, pick(staff, i), i % 2_000],
            )
          : kind < 4
            ? sql.query(
                `UPDATE appointments SET status = CASE status WHEN 'confirmed' THEN 'completed' ELSE 'confirmed' END,
                   updated_at = now() WHERE org_id = $1 AND id = $2`,
                [org.id, pick(appointments, i)],
              )
            : sql.query(
                `UPDATE customers SET first_name = $3, updated_at = now() WHERE org_id = $1 AND id = $2`,
                [org.id, pick(customers, i), `Renamed${i}`],
              ),
      )
      if ((i + 1) % 10_000 === 0) log(`${i + 1} writes`)
    }
    const seconds = (performance.now() - started) / 1000
    // The looks after the last writes, before this process lets DATA_DIR go, as a server's would.
    await sleep(12_000)
    const app = await buildApp({ store, config: { apiKeyBrand: 'svc', logLevel: 'silent' } })
    try {
      const pages = await timePages(
        async (url) =>
          (await app.inject({ url, headers: { authorization: `Bearer ${org.key}` } })).statusCode,
      )
      return { seconds, maintenance, pages }
    } finally {
      await app.close()
    }
  } finally {
    await store.close()
  }
}

const workDir = mkdtempSync(join(tmpdir(), 'openbook-embedded-scale-'))
const dataDir = join(workDir, 'data')
try {
  const loadBefore = loadAverageText()
  log(`seeding ${APPOINTMENTS} appointments and ${CUSTOMERS} customers into ${dataDir}`)
  const seed = await runMeasured(
    [
      'dist/cli/index.js',
      'seed',
      '--orgs',
      '1',
      '--customers',
      String(CUSTOMERS),
      '--appointments',
      String(APPOINTMENTS),
      '--seed',
      '1',
    ],
    { PATH: process.env.PATH, HOME: process.env.HOME, DATA_DIR: dataDir },
  )
  const seededBytes = directoryBytes(dataDir)
  log(`seeded in ${seed.seconds.toFixed(1)} s, peak ${seed.peakMb} MB, DATA_DIR ${mb(seededBytes / 1024)} MB`)
  const org = await keyOf(dataDir)
  const first = await serve(dataDir, org)
  log(`first start ${first.startSeconds.toFixed(1)} s: ${JSON.stringify(first.pages)}`)
  const restart = await serve(dataDir, org)
  log(`restart ${restart.startSeconds.toFixed(1)} s`)
  const writes = await writeAnHour(dataDir, org)
  log(`${WRITES} writes in ${writes.seconds.toFixed(0)} s; maintenance ${JSON.stringify(writes.maintenance)}`)
  const after = await serve(dataDir, org)
  const afterBytes = directoryBytes(dataDir)
  const loadAfter = loadAverageText()

  const f = (value: number) => value.toFixed(1)
  const vacuums = writes.maintenance
  const longest = vacuums.reduce((most, run) => (run.ms > (most?.ms ?? -1) ? run : most), vacuums[0])
  const table = [
    `\`npm run bench:embedded -- --scale ${APPOINTMENTS},${CUSTOMERS} --writes ${WRITES}\`: \`openbook seed --orgs 1 ` +
      `--customers ${CUSTOMERS} --appointments ${APPOINTMENTS}\` into a new DATA_DIR (no DATABASE_URL), the built ` +
      `server's first start and a restart, then ${WRITES.toLocaleString('en')} one-row writes through SQL on the store ` +
      `(an hour at 20 a second, run as fast as the store took them, ` +
      `${values['no-autovacuum'] ? 'WITHOUT' : 'with'} the server's autovacuum), the pages in that process after ` +
      `them (through the app, no HTTP), and a start after them. A page is ${PAGE} rows; its time is the first and the median of ${REQUESTS} requests one at a time. ` +
      `${cpus().length} cores shared with other work: load average (1, 5, 15 min) ${loadBefore} before, ${loadAfter} after.`,
    '',
    '| | figure |',
    '|---|---:|',
    `| seed (with its vacuum) | ${f(seed.seconds)} s, peak RSS ${seed.peakMb} MB |`,
    `| DATA_DIR after the seed | ${mb(seededBytes / 1024)} MB |`,
    `| first start, to the first page | ${f(first.startSeconds)} s |`,
    `| restart, to the first page | ${f(restart.startSeconds)} s |`,
    `| server RSS after the pages (peak) | first ${first.rssMb} (${first.peakMb}) MB, restart ${restart.rssMb} (${restart.peakMb}) MB, after the writes ${after.rssMb} (${after.peakMb}) MB |`,
    `| ${WRITES.toLocaleString('en')} writes | ${f(writes.seconds)} s (${Math.round(WRITES / writes.seconds)}/s) |`,
    `| autovacuum during the writes | ${vacuums.length} statements, ${f(vacuums.reduce((sum, run) => sum + run.ms, 0) / 1000)} s in all, longest ${longest ? `${longest.statement} ${longest.table} ${longest.ms} ms` : '–'} |`,
    `| start after the writes, to the first page | ${f(after.startSeconds)} s |`,
    `| DATA_DIR after the writes | ${mb(afterBytes / 1024)} MB |`,
    '',
    '| page | after the seed: first / median ms | after the writes, in the writing process | after the writes, started again |',
    '|---|---:|---:|---:|',
    ...first.pages.map((page, i) => {
      const cell = (time: PageTime | undefined) => (time ? `${f(time.firstMs)} / ${f(time.medianMs)}` : '–')
      return `| ${page.label} | ${cell(page)} | ${cell(writes.pages[i])} | ${cell(after.pages[i])} |`
    }),
  ].join('\n')
  process.stdout.write(`${table}\n`)
  if (values.write && !values['no-autovacuum']) {
    writeResultsSection(
      `embedded-scale-${APPOINTMENTS}`,
      `## Embedded store at ${APPOINTMENTS.toLocaleString('en')} appointments\n\n${table}`,
    )
  }
} finally {
  rmSync(workDir, { recursive: true, force: true })
}
