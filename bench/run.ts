/**
 * npm run bench: seeds (or reuses) a PostgreSQL database per data scale with the real CLI, then
 * loads the same requests against pgbench (the SQL alone), a minimal node:http + pg handler,
 * openbook and an older openbook build (--previous-dir), and openbook on the embedded store;
 * writes bench/RESULTS.md.
 */
import { mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs'
import { loadavg, tmpdir } from 'node:os'
import { join } from 'node:path'
import pg from 'pg'
import { ACCEPT_ENCODING } from '../packages/client/src/transport.js'
import { PIPELINE_DEPTH } from '../src/store/postgres/pipeline.js'
import { type BenchReport, type MixResult, microsPerRequest, type ScaleReport } from './checks.js'
import {
  type CountPlan,
  type DataSet,
  databaseUrl,
  dropDatabase,
  explainCount,
  type SeedInfo,
} from './data.js'
import { measureEmbedded } from './embedded.js'
import { CEILING, type PgbenchRun, pgbenchRun } from './ladder.js'
import { httpLoad, type LoadResult } from './load.js'
import {
  halfLoad,
  type LoadSettings,
  loadTogether,
  measurePgbench,
  saturate,
  type TargetResult,
  targetResult,
  warmServer,
} from './measure.js'
import { metered } from './meter.js'
import { type BenchOrg, type Mix, type OrgSize, PAGE_SIZE } from './mixes.js'
import { type BenchOptions, parseOptions, type Scale } from './options.js'
import { pacedLoad } from './paced.js'
import { runFromRoot } from './paths.js'
import { prepareMixes } from './prepared-mixes.js'
import { killAll, run, runOk, statusKb } from './proc.js'
import { machineInfo, writeReport } from './report.js'
import { combineRounds, median, type Saturation } from './rounds.js'
import { startBaseline, startOpenbook, startStatic, type Target } from './servers.js'
import { captureStatements } from './sql.js'

runFromRoot()
const started = performance.now()
const seconds = () => (performance.now() - started) / 1000
const log = (line: string) => {
  const s = Math.round(seconds())
  process.stderr.write(
    `[${String(Math.floor(s / 60)).padStart(2, '0')}:${String(s % 60).padStart(2, '0')}] ${line}\n`,
  )
}

let workDirPath: string | undefined

/** Scratch files of this run (pgbench scripts, the embedded DATA_DIR), made when first needed. */
function workDir(): string {
  workDirPath ??= mkdtempSync(join(tmpdir(), 'openbook-bench-'))
  return workDirPath
}
const stops: (() => Promise<void>)[] = []

async function cleanUp(): Promise<void> {
  for (const stop of stops.splice(0).reverse()) await stop().catch(() => {})
  killAll()
  if (workDirPath) rmSync(workDirPath, { recursive: true, force: true })
}

process.on('SIGINT', () => {
  void cleanUp().finally(() => process.exit(130))
})

/**
 * Seconds per measurement that fit what is left of the budget: per mix, pgbench runs twice and
 * each server is warmed twice and measured twice (saturation, then half load); then the latency
 * floor and three embedded mixes.
 */
function autoDuration(options: BenchOptions, mixes: number, servers: number): number {
  if (options.duration !== undefined) return options.duration
  const left = options.budgetMinutes * 60 - seconds()
  // Per mix: each server's saturation and latency rounds, openbook's with the client's encoding,
  // pgbench's two loads.
  const loads = servers * 2 * options.rounds + options.rounds + (options.pgbench ? 2 : 0)
  const fixed =
    mixes * ((servers + 1) * (2 * options.warmup + options.rounds) + (options.pgbench ? 2 : 0)) +
    3 * options.warmup +
    60
  return Math.min(5, Math.max(2, Math.floor((left - fixed) / (mixes * loads + 4))))
}

interface Answer {
  readonly target: Target
  readonly text: string
}

async function answerOf(target: Target, mix: Mix): Promise<Answer> {
  const response = await fetch(target.baseUrl + mix.path, {
    headers: { authorization: `Bearer ${mix.org.key}` },
  })
  const body = (await response.json()) as { data?: { id: string }[]; pagination?: { total: number } }
  if (response.status !== 200 || !body.data?.length) {
    return { target, text: `${response.status} with ${body.data?.length ?? 0} rows` }
  }
  return {
    target,
    text: `total ${body.pagination?.total}, ids ${body.data.map((item) => item.id).join(',')}`,
  }
}

/**
 * Same status, total and ids from the minimal handler and openbook (they answer the same question,
 * or the run stops); the older build's difference, if any, is returned and reported.
 */
async function checkSameAnswers(
  mix: Mix,
  targets: readonly Target[],
  previous?: Target,
): Promise<string | undefined> {
  const answers = await Promise.all(targets.map((target) => answerOf(target, mix)))
  const expected = answers[0]?.text ?? ''
  if (!expected.startsWith('total') || answers.some((a) => a.text !== expected)) {
    throw new Error(
      `the targets disagree on ${mix.path}: ${answers.map((a) => `${a.target.name} ${a.text.slice(0, 80)}`).join('; ')}`,
    )
  }
  if (!previous) return undefined
  const old = await answerOf(previous, mix)
  return old.text === expected ? undefined : `${old.text.slice(0, 60)} instead of ${expected.slice(0, 60)}`
}

const FLOOR_RATE = 200

/**
 * The machine's own latency and the HTTP exchange's own cost: a server that does no work, loaded
 * like the others at half load, then at saturation with its CPU a request.
 */
async function measureFloor(load: LoadSettings): Promise<BenchReport['floor']> {
  const target = await startStatic()
  try {
    const url = `${target.baseUrl}/`
    const paced = await pacedLoad({
      url,
      headers: {},
      connections: load.connections,
      seconds: load.duration,
      rate: FLOOR_RATE,
    })
    const { result, usage } = await metered(
      target.service.pid,
      async () => [],
      () => httpLoad({ url, headers: {}, connections: load.connections, seconds: load.duration }),
    )
    return {
      ...paced,
      rate: FLOOR_RATE,
      saturation: { rps: result.rps, nodeMicros: microsPerRequest(usage.serverCpu, result.rps) },
    }
  } finally {
    await target.service.stop()
  }
}

const LATEST = 'bench/results/latest.json'

/** A build's commit, with a mark when its working tree has changes. */
async function commitOf(dir: string): Promise<string> {
  const head = await run('git', ['-C', dir, 'rev-parse', '--short', 'HEAD'])
  if (head.code !== 0) return 'unknown'
  // The benchmark's own files do not change the build measured.
  const status = await run('git', [
    '-C',
    dir,
    'status',
    '--porcelain',
    '--untracked-files=no',
    '--',
    '.',
    ':!bench',
  ])
  return `${head.stdout.trim()}${status.stdout.trim() ? ' with uncommitted changes' : ''}`
}

const loadAverage = () => loadavg().map((value) => Math.round(value * 100) / 100)

/** One scale's database, ready: seeded (or reused), vacuumed, keys made, mixes placed. */
interface PreparedScale {
  readonly data: DataSet
  readonly seed: SeedInfo
  readonly orgs: Record<OrgSize, BenchOrg>
  readonly mixes: Mix[]
  readonly explain: CountPlan[]
  readonly monitor: pg.Client
}

async function prepareScale(options: BenchOptions, scale: Scale): Promise<PreparedScale> {
  const data: DataSet = { pgUrl: options.pgUrl, scale, cliDir: options.openbookDir, fresh: options.fresh }
  log(`scale ${scale.name}: database ${scale.database}`)
  const { seed, orgs, monitor, mixes } = await prepareMixes(data, log, options)
  stops.push(() => monitor.end())
  log(
    seed.fresh
      ? `seeded in ${seed.seconds} s (${seed.rowsPerSecond} rows/s); VACUUM ANALYZE ${seed.vacuumSeconds} s`
      : `VACUUM ANALYZE ${seed.vacuumSeconds} s`,
  )
  log(
    `organizations: ${Object.values(orgs)
      .map((o) => `${o.size} ${o.id} (${o.customers} customers)`)
      .join(', ')}`,
  )
  const firstPage = { page: { limit: PAGE_SIZE, offset: 0 }, filters: {} }
  const explain = [
    await explainCount(monitor, orgs.large.key, orgs.large.id, { resource: 'customers', ...firstPage }),
    await explainCount(monitor, orgs.large.key, orgs.large.id, { resource: 'appointments', ...firstPage }),
  ]
  // The count of each value filter with a date range (the mixes `apt-l-<filter>-dates-first`).
  for (const filtered of mixes.filter((mix) => /^apt-l-.+-dates-first$/.test(mix.id))) {
    const label = `appointments (${Object.keys(filtered.request.filters).join(', ')})`
    explain.push(await explainCount(monitor, orgs.large.key, orgs.large.id, filtered.request, label))
  }
  for (const plan of explain) {
    log(
      `count of ${plan.label} (largest org): ${plan.scans.join('; ')}; heap fetches ${plan.heapFetches}, ${plan.ms} ms`,
    )
  }
  return { data, seed, orgs, mixes, explain, monitor }
}

/** Every mix of one scale through pgbench, the minimal handler, openbook and the older build. */
async function measureScale(
  options: BenchOptions,
  prepared: PreparedScale,
  settings: LoadSettings,
): Promise<ScaleReport> {
  const { data, mixes, monitor } = prepared
  const scriptDir = join(workDir(), data.scale.name)
  mkdirSync(scriptDir, { recursive: true })
  // pgbench: the ceiling, -M prepared on the statements openbook runs (bench/ladder.ts).
  const ceilings = new Map<string, PgbenchRun>()
  for (const mix of mixes) {
    const run = pgbenchRun(CEILING, await captureStatements(mix.org.key, mix.org.id, mix.request), mix.org.id)
    const file = join(scriptDir, `${mix.id}.sql`)
    writeFileSync(file, run.script)
    ceilings.set(mix.id, run)
  }
  const ceilingOf = (mix: Mix) => {
    const run = ceilings.get(mix.id)
    if (!run) throw new Error(`no pgbench script for ${mix.id}`)
    const { script: _script, ...how } = run
    return { ...how, scriptFile: join(scriptDir, `${mix.id}.sql`) }
  }

  const url = databaseUrl(data)
  // The minimal handler sends its requests' messages as openbook does: pipelined on a shared
  // connection when they come in the same turn.
  const baseline = await startBaseline(url, options.poolSize, {
    name: 'baseline',
    env: { PIPELINE_DEPTH: String(PIPELINE_DEPTH), PIPELINE_JOIN: 'tick' },
  })
  stops.push(baseline.service.stop)
  const openbook = await startOpenbook('openbook', options.openbookDir, url)
  stops.push(openbook.service.stop)
  const previous = options.previousDir ? await startOpenbook('previous', options.previousDir, url) : undefined
  if (previous) stops.push(previous.service.stop)
  const servers = previous ? [baseline, openbook, previous] : [baseline, openbook]
  // openbook again, asked as the shipped client asks (its Accept-Encoding): saturation rounds only.
  const encoded: Target = {
    ...openbook,
    name: 'openbook, client encoding',
    headers: { 'accept-encoding': ACCEPT_ENCODING },
  }
  const saturated = [...servers, encoded]
  const disagreements = new Map<string, string>()
  for (const mix of mixes) {
    const difference = await checkSameAnswers(mix, [baseline, openbook], previous)
    if (difference) {
      disagreements.set(mix.id, difference)
      log(`${mix.id}: the older build answers ${difference}`)
    }
  }

  log(`${data.scale.name}: warming caches, every mix for 1 s through pgbench`)
  for (const mix of mixes)
    await measurePgbench(url, ceilingOf(mix), { ...settings, duration: 1 }, monitor, () => {})
  if (settings.warmup > 0) {
    log(`${data.scale.name}: warming the servers, every mix for ${settings.warmup} s through each`)
    const paths = mixes.map((mix) => ({ path: mix.path, key: mix.org.key }))
    for (const server of servers) await warmServer(server, paths, settings)
  }

  const start = loadAverage()
  const results: MixResult[] = []
  for (const [index, mix] of mixes.entries()) {
    log(`${data.scale.name} mix ${index + 1}/${mixes.length} ${mix.id}: ${mix.path}`)
    const pgbench = options.pgbench
      ? await measurePgbench(url, ceilingOf(mix), settings, monitor, log)
      : undefined
    // Saturation in rounds, the servers taking turns at going first: on a shared machine a load
    // that comes and goes should not always fall on the same target, and a ratio is taken between
    // the two measurements of one round. Then, in rounds again, each server's latency at half its
    // median rate.
    const rounds = new Map<Target, Saturation[]>(saturated.map((server) => [server, []]))
    for (let round = 0; round < settings.rounds; round++) {
      for (let turn = 0; turn < saturated.length; turn++) {
        const server = saturated[(index + round + turn) % saturated.length]
        if (!server) continue
        const result = await saturate(server, mix.path, mix.org.key, settings, monitor, round === 0)
        rounds.get(server)?.push(result)
      }
    }
    // Then the minimal handler and openbook at the same time, in rounds: a ratio that the machine's
    // other load cannot tilt, since it falls on both within the same seconds.
    const sideBySide: number[] = []
    let sideBySideFailures = 0
    for (let round = 0; round < settings.rounds; round++) {
      const [minimal, ours] = await loadTogether(
        [baseline, openbook],
        mix.path,
        mix.org.key,
        settings,
        monitor,
      )
      if (!minimal || !ours) continue
      sideBySide.push(ours.rps / minimal.rps)
      sideBySideFailures += minimal.failures + ours.failures
    }
    log(
      `side by side: openbook ÷ minimal ${sideBySide.map((r) => r.toFixed(2)).join(', ')}` +
        (sideBySideFailures ? ` FAILURES ${sideBySideFailures}` : ''),
    )
    const halfRate = new Map(
      servers.map((server) => [server, median((rounds.get(server) ?? []).map((r) => r.rps)) / 2]),
    )
    const halves = new Map<Target, LoadResult[]>(servers.map((server) => [server, []]))
    for (let round = 0; round < settings.rounds; round++) {
      for (let turn = 0; turn < servers.length; turn++) {
        const server = servers[(index + round + turn) % servers.length]
        if (!server) continue
        const rate = halfRate.get(server) ?? 0
        halves.get(server)?.push(await halfLoad(server, mix.path, mix.org.key, settings, monitor, rate))
      }
    }
    const measured = new Map<Target, TargetResult>()
    for (const server of servers)
      measured.set(server, targetResult(server.name, rounds.get(server) ?? [], halves.get(server) ?? [], log))
    const resultOf = (server: Target) => {
      const result = measured.get(server)
      if (!result) throw new Error(`${server.name} was not measured`)
      return result
    }
    const baselineResult = resultOf(baseline)
    const openbookResult = resultOf(openbook)
    const previousResult = previous ? resultOf(previous) : undefined
    const clientEncoding = combineRounds(rounds.get(encoded) ?? [])
    log(
      `openbook with Accept-Encoding ${ACCEPT_ENCODING}: ${Math.round(clientEncoding.rps)}/s` +
        (clientEncoding.failures ? ` FAILURES ${clientEncoding.failures}` : ''),
    )
    const { id, label, position, path } = mix
    results.push({
      id,
      label,
      size: mix.org.size,
      position,
      path,
      pgbench,
      baseline: baselineResult,
      openbook: openbookResult,
      clientEncoding,
      previous: previousResult,
      previousDisagrees: disagreements.get(mix.id),
      sideBySide,
    })
  }
  const rss = {
    openbookMb: statusKb(openbook.service.pid, 'VmHWM') / 1024,
    baselineMb: statusKb(baseline.service.pid, 'VmHWM') / 1024,
    previousMb: previous ? statusKb(previous.service.pid, 'VmHWM') / 1024 : undefined,
  }
  for (const server of servers) await server.service.stop()
  return {
    scale: data.scale,
    seed: prepared.seed,
    orgs: Object.values(prepared.orgs).map(({ key: _key, ...org }) => org),
    explain: prepared.explain,
    mixes: results,
    rss,
    loadAverage: { start, end: loadAverage() },
  }
}

async function main(): Promise<void> {
  const options = parseOptions(process.argv.slice(2))
  if (options.renderOnly) {
    writeReport(JSON.parse(readFileSync(LATEST, 'utf8')) as BenchReport)
    log(`bench/RESULTS.md written again from ${LATEST}`)
    return
  }
  if (options.build) {
    log('building (npm run build)')
    await runOk('npm', ['run', 'build'], { timeoutMs: 300_000 })
  }
  const openbookCommit = await commitOf(options.openbookDir)
  const previous = options.previousDir
    ? { dir: options.previousDir, commit: await commitOf(options.previousDir) }
    : undefined
  log(`openbook ${openbookCommit}${previous ? `, older build ${previous.commit} in ${previous.dir}` : ''}`)

  const prepared: PreparedScale[] = []
  for (const scale of options.scales) prepared.push(await prepareScale(options, scale))
  if (options.prepareOnly) {
    log(`databases ready: ${prepared.map((p) => p.data.scale.database).join(', ')}`)
    return
  }

  const mixCount = prepared.reduce((sum, p) => sum + p.mixes.length, 0)
  const settings: LoadSettings = {
    duration: autoDuration(options, mixCount, previous ? 3 : 2),
    rounds: options.rounds,
    warmup: options.warmup,
    connections: options.connections,
    poolSize: options.poolSize,
  }
  log(
    `${mixCount} mixes, ${settings.duration} s per measurement, ${settings.rounds} saturation rounds per server`,
  )

  const floor = await measureFloor(settings)
  log(
    `latency floor (static server, ${FLOOR_RATE}/s): p50 ${floor.p50?.toFixed(2)} p99 ${floor.p99?.toFixed(2)} ms; ` +
      `saturated ${floor.saturation?.rps.toFixed(0)}/s, node ${floor.saturation?.nodeMicros?.toFixed(0)} µs a request`,
  )

  const scales: ScaleReport[] = []
  for (const scale of prepared) scales.push(await measureScale(options, scale, settings))
  const machine = await machineInfo(prepared[0]?.monitor ?? (await connectedMonitor(options)))

  log(
    `openbook on the embedded store (demo organization${options.crowd ? `, with the ${options.crowd.shape} crowd` : ''})`,
  )
  const embedded = await measureEmbedded(
    workDir(),
    settings,
    log,
    (stop) => stops.push(stop),
    options.openbookDir,
    options.crowd,
  )

  const argv = process.argv.slice(2)
  const report: BenchReport = {
    finishedAt: new Date().toISOString(),
    totalSeconds: Math.round(seconds()),
    command: argv.length ? `npm run bench -- ${argv.join(' ')}` : 'npm run bench',
    machine,
    options,
    load: settings,
    previous,
    openbookCommit,
    floor,
    scales,
    embedded,
  }
  mkdirSync('bench/results', { recursive: true })
  writeFileSync(LATEST, `${JSON.stringify(report, null, 2)}\n`)
  if (options.write) writeReport(report)
  if (options.dropDatabases) {
    for (const scale of prepared) {
      await scale.monitor.end().catch(() => {})
      await dropDatabase(scale.data)
      log(`dropped database ${scale.data.scale.database}`)
    }
  }
  log(`done in ${report.totalSeconds} s${options.write ? ': bench/RESULTS.md updated' : ''}`)
}

async function connectedMonitor(options: BenchOptions): Promise<pg.Client> {
  const monitor = new pg.Client({ connectionString: `${options.pgUrl}/postgres` })
  await monitor.connect()
  stops.push(() => monitor.end())
  return monitor
}

try {
  await main()
} catch (error) {
  log(`failed: ${(error as Error).stack ?? error}`)
  process.exitCode = 1
} finally {
  await cleanUp()
}
