/**
 * npm run bench: seeds (or reuses) a PostgreSQL benchmark database with the real CLI, then
 * loads the same requests against pgbench (the SQL alone), a minimal node:http + pg handler
 * and openbook, and openbook on the embedded store; writes bench/RESULTS.md and the README table.
 */
import { mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import pg from 'pg'
import type { BenchReport } from './checks.js'
import {
  busyCustomer,
  countOf,
  databaseUrl,
  explainCount,
  prepareDatabase,
  prepareOrganizations,
} from './data.js'
import { measureEmbedded } from './embedded.js'
import type { LoadResult } from './load.js'
import { type LoadSettings, measureHttp, measurePgbench, type TargetResult, warmServer } from './measure.js'
import { buildMixes, type Mix, PAGE_SIZE } from './mixes.js'
import { type BenchOptions, parseOptions } from './options.js'
import { pacedLoad } from './paced.js'
import { killAll, runOk, statusKb } from './proc.js'
import { machineInfo, writeReport } from './report.js'
import { startBaseline, startOpenbook, startStatic, type Target } from './servers.js'
import { captureStatements, pgbenchScript } from './sql.js'

const started = performance.now()
const seconds = () => (performance.now() - started) / 1000
const log = (line: string) => {
  const s = Math.round(seconds())
  process.stderr.write(
    `[${String(Math.floor(s / 60)).padStart(2, '0')}:${String(s % 60).padStart(2, '0')}] ${line}\n`,
  )
}

const workDir = mkdtempSync(join(tmpdir(), 'openbook-bench-'))
const stops: (() => Promise<void>)[] = []

async function cleanUp(): Promise<void> {
  for (const stop of stops.splice(0).reverse()) await stop().catch(() => {})
  killAll()
  rmSync(workDir, { recursive: true, force: true })
}

process.on('SIGINT', () => {
  void cleanUp().finally(() => process.exit(130))
})

/**
 * Seconds per measurement that fit what is left of the budget: per mix, pgbench runs twice and
 * each server twice after a warm-up; then the latency floor and three embedded mixes.
 */
function autoDuration(options: BenchOptions, mixes: number): number {
  if (options.duration !== undefined) return options.duration
  const left = options.budgetMinutes * 60 - seconds()
  const fixed = mixes * (4 * options.warmup + 5) + 3 * options.warmup + 40
  return Math.min(5, Math.max(2, Math.floor((left - fixed) / (mixes * 6 + 4))))
}

/** Same status, total and ids from both servers: they answer the same question. */
async function checkSameAnswers(mix: Mix, targets: readonly Target[]): Promise<void> {
  const answers = await Promise.all(
    targets.map(async (target) => {
      const response = await fetch(target.baseUrl + mix.path, {
        headers: { authorization: `Bearer ${mix.org.key}` },
      })
      const body = (await response.json()) as { data?: { id: string }[]; pagination?: { total: number } }
      if (response.status !== 200 || !body.data?.length) {
        throw new Error(
          `${target.name} answered ${response.status} with ${body.data?.length ?? 0} rows for ${mix.path}`,
        )
      }
      return `${body.pagination?.total}:${body.data.map((item) => item.id).join(',')}`
    }),
  )
  if (new Set(answers).size !== 1) throw new Error(`the targets disagree on ${mix.path}`)
}

const FLOOR_RATE = 200

/** The machine's own latency: a server that does no work, loaded like the others at half load. */
async function measureFloor(load: LoadSettings): Promise<LoadResult> {
  const target = await startStatic()
  try {
    const url = `${target.baseUrl}/`
    return await pacedLoad({
      url,
      headers: {},
      connections: load.connections,
      seconds: load.duration,
      rate: FLOOR_RATE,
    })
  } finally {
    await target.service.stop()
  }
}

const LATEST = 'bench/results/latest.json'

async function main(): Promise<void> {
  const options = parseOptions(process.argv.slice(2))
  if (options.renderOnly) {
    writeReport(JSON.parse(readFileSync(LATEST, 'utf8')) as BenchReport)
    log(`bench/RESULTS.md and README.md written again from ${LATEST}`)
    return
  }
  if (options.build) {
    log('building (npm run build)')
    await runOk('npm', ['run', 'build'], { timeoutMs: 300_000 })
  }
  const seed = await prepareDatabase(options, log)
  log(
    seed.fresh
      ? `seeded in ${seed.seconds} s (${seed.rowsPerSecond} rows/s); VACUUM ANALYZE ${seed.vacuumSeconds} s`
      : `VACUUM ANALYZE ${seed.vacuumSeconds} s`,
  )
  const orgs = await prepareOrganizations(options)
  log(
    `organizations: ${Object.values(orgs)
      .map((o) => `${o.size} ${o.id} (${o.customers} customers)`)
      .join(', ')}`,
  )

  const monitor = new pg.Client({ connectionString: databaseUrl(options, 'openbook-bench-monitor') })
  await monitor.connect()
  stops.push(() => monitor.end())

  const context = { largeCustomerId: await busyCustomer(monitor, orgs.large.id), now: new Date() }
  const count = (orgId: string, request: Mix['request']) => countOf(monitor, orgs.large.key, orgId, request)
  const mixes = await buildMixes(orgs, context, count, options.only)
  const firstPage = { page: { limit: PAGE_SIZE, offset: 0 }, filters: {} }
  const explain = [
    await explainCount(monitor, orgs.large.key, orgs.large.id, { resource: 'customers', ...firstPage }),
    await explainCount(monitor, orgs.large.key, orgs.large.id, { resource: 'appointments', ...firstPage }),
  ]
  const filtered = mixes.find((mix) => mix.id === 'apt-l-filtered')
  if (filtered) {
    const label = `appointments (${Object.keys(filtered.request.filters).join(', ')})`
    explain.push(await explainCount(monitor, orgs.large.key, orgs.large.id, filtered.request, label))
  }
  for (const plan of explain) {
    log(
      `count of ${plan.label} (largest org): ${plan.scans.join('; ')}; heap fetches ${plan.heapFetches}, ${plan.ms} ms`,
    )
  }

  const scripts = new Map<string, string>()
  for (const mix of mixes) {
    const file = join(workDir, `${mix.id}.sql`)
    writeFileSync(file, pgbenchScript(await captureStatements(mix.org.key, mix.org.id, mix.request)))
    scripts.set(mix.id, file)
  }
  const scriptOf = (mix: Mix) => scripts.get(mix.id) ?? ''

  const url = databaseUrl(options)
  const baseline = await startBaseline(url, options.poolSize)
  stops.push(baseline.service.stop)
  const openbook = await startOpenbook(url)
  stops.push(openbook.service.stop)
  for (const mix of mixes) await checkSameAnswers(mix, [baseline, openbook])

  log('warming caches: every mix for 1 s through pgbench')
  const settings: LoadSettings = {
    duration: 1,
    warmup: options.warmup,
    connections: options.connections,
    poolSize: options.poolSize,
  }
  for (const mix of mixes) await measurePgbench(url, scriptOf(mix), settings, monitor, () => {})
  if (options.warmup > 0) {
    log(`warming the servers: every mix for ${options.warmup} s through each`)
    const paths = mixes.map((mix) => ({ path: mix.path, key: mix.org.key }))
    for (const server of [baseline, openbook]) await warmServer(server, paths, settings)
  }
  const load: LoadSettings = { ...settings, duration: autoDuration(options, mixes.length) }
  log(`${load.duration} s per measurement`)

  const floor = await measureFloor(load)
  log(
    `latency floor (static server, ${FLOOR_RATE}/s): p50 ${floor.p50?.toFixed(2)} p99 ${floor.p99?.toFixed(2)} ms`,
  )

  const results: BenchReport['mixes'] = []
  for (const [index, mix] of mixes.entries()) {
    log(`mix ${index + 1}/${mixes.length} ${mix.id}: ${mix.path}`)
    const measured: Record<'pgbench' | 'baseline' | 'openbook', TargetResult> = {
      pgbench: await measurePgbench(url, scriptOf(mix), load, monitor, log),
      baseline: await measureHttp(baseline, mix.path, mix.org.key, load, monitor, log),
      openbook: await measureHttp(openbook, mix.path, mix.org.key, load, monitor, log),
    }
    const { id, label, position, path } = mix
    results.push({ id, label, size: mix.org.size, position, path, ...measured })
  }
  const rss = {
    openbookMb: statusKb(openbook.service.pid, 'VmHWM') / 1024,
    baselineMb: statusKb(baseline.service.pid, 'VmHWM') / 1024,
  }
  await openbook.service.stop()
  await baseline.service.stop()

  log('openbook on the embedded store (demo organization)')
  const embedded = await measureEmbedded(workDir, load, log, (stop) => stops.push(stop))

  const argv = process.argv.slice(2)
  const report: BenchReport = {
    finishedAt: new Date().toISOString(),
    totalSeconds: Math.round(seconds()),
    command: argv.length ? `npm run bench -- ${argv.join(' ')}` : 'npm run bench',
    machine: await machineInfo(monitor),
    options,
    load,
    floor: { rate: FLOOR_RATE, ...floor },
    seed,
    orgs: Object.values(orgs).map(({ key: _key, ...org }) => org),
    explain,
    mixes: results,
    rss,
    embedded,
  }
  mkdirSync('bench/results', { recursive: true })
  writeFileSync(LATEST, `${JSON.stringify(report, null, 2)}\n`)
  if (options.write) writeReport(report)
  log(`done in ${report.totalSeconds} s${options.write ? ': bench/RESULTS.md and README.md updated' : ''}`)
}

try {
  await main()
} catch (error) {
  log(`failed: ${(error as Error).stack ?? error}`)
  process.exitCode = 1
} finally {
  await cleanUp()
}
