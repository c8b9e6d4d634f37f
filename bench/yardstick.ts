/**
 * npm run bench:yardstick -- [--scales full,100k] [--only cus-s-first,…] [--rounds N] [--duration S]
 *   [--warmup S] [--openbook-dir DIR] [--previous-dir DIR (another build, measured beside it)]
 *   [--no-ladder (pgbench: the ceiling, saturated and paced, and the paced message only)]
 *   [--paced-ladder (openbook and its A/A twin, the ceiling, and the ladder's parts of openbook's
 *   message, each at openbook's rate: where the rest is, at the same rate)]
 *
 * openbook against the database's own ceiling, and each request-path technique's own share.
 * On the databases of `npm run bench` (seeded, or reused as they are), per mix,
 * in rounds in which every target takes its turn (the order rotating), so that whatever else the
 * machine does falls on all of them alike:
 *
 * - pgbench `-M prepared` on the statements openbook runs, the key lookup and the page with the
 *   same parameters, as the same role with the same settings (made per session, PGOPTIONS): the
 *   ceiling. And pgbench scripts of openbook's own messages, each without one of their parts (the
 *   transaction's BEGIN and COMMIT, the settings, the key lookup), with `openbook_prepare`, and the
 *   two statements alone in one simple-protocol message: where openbook's PostgreSQL CPU goes.
 * - The ceiling and openbook's own message again, paced (`pgbench --rate`) at the req/s openbook
 *   reached on the mix (`…-paced`): PostgreSQL spends CPU per second and per wake-up whatever the
 *   work, so a statement costs more a transaction at a lower rate; these compare like with like.
 * - openbook as built, and openbook with one technique switched off (bench/technique-off.mjs) or
 *   with `DATABASE_PREPARED_STATEMENTS=pooler`.
 *
 * Prints the tables (markdown) and writes every round to bench/results/yardstick.json.
 */
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs'
import { loadavg, tmpdir } from 'node:os'
import { join, resolve } from 'node:path'
import { pathToFileURL } from 'node:url'
import { type DataSet, databaseUrl } from './data.js'
import {
  CEILING,
  MESSAGE,
  PACED_LADDER,
  PGBENCH,
  type PgbenchRun,
  type PgbenchVariant,
  pgbenchRun,
} from './ladder.js'
import { type PgbenchLoad, pgbenchLoad } from './load.js'
import { type LoadSettings, saturate, warmServer } from './measure.js'
import { backendPids, metered, quiesce } from './meter.js'
import type { Mix } from './mixes.js'
import { parseOptions } from './options.js'
import { runFromRoot } from './paths.js'
import { prepareMixes } from './prepared-mixes.js'
import { killAll } from './proc.js'
import { median } from './rounds.js'
import { startOpenbook, type Target } from './servers.js'
import { captureStatements } from './sql.js'

runFromRoot()
const started = performance.now()
const log = (line: string) => {
  const s = Math.round((performance.now() - started) / 1000)
  process.stderr.write(
    `[${String(Math.floor(s / 60)).padStart(2, '0')}:${String(s % 60).padStart(2, '0')}] ${line}\n`,
  )
}
const stops: (() => Promise<void>)[] = []
const workDir = mkdtempSync(join(tmpdir(), 'openbook-yardstick-'))

async function cleanUp(): Promise<void> {
  for (const stop of stops.splice(0).reverse()) await stop().catch(() => {})
  killAll()
  rmSync(workDir, { recursive: true, force: true })
}
process.on('SIGINT', () => {
  void cleanUp().finally(() => process.exit(130))
})

/** The mixes measured unless `--only` says otherwise: small and medium organizations, where the request path's own cost shows. */
const DEFAULT_MIXES = 'cus-s-first,cus-m-middle,apt-m-dates'

/** openbook servers: as built, and each with one technique off. */
const SERVERS: readonly { name: string; technique?: string; env?: NodeJS.ProcessEnv; what: string }[] = [
  { name: 'openbook', what: 'openbook as built (every technique on)' },
  {
    name: 'openbook-again',
    what: "a second server of openbook as built: the A/A control, whose difference to openbook is the run's noise",
  },
  {
    name: 'no-one-trip',
    technique: 'one-trip',
    what: 'the page sent once the key is known (two round trips), still by SQL-level EXECUTE',
  },
  {
    name: 'no-sql-prepare',
    technique: 'sql-prepare',
    what: "the page by the extended protocol's named statement (node-postgres waits for each answer: two round trips)",
  },
  {
    name: 'pooler',
    env: { DATABASE_PREPARED_STATEMENTS: 'pooler' },
    what: '`DATABASE_PREPARED_STATEMENTS=pooler`: openbook_prepare in every message',
  },
  {
    name: 'no-text-timestamps',
    technique: 'text-timestamps',
    what: 'timestamps and dates written by to_char in the database, not as text rewritten by Node',
  },
  {
    name: 'no-row-bytes',
    technique: 'row-bytes',
    what: "the items written from the rows pg makes, not from the rows' bytes as they arrive",
  },
]

interface Round {
  readonly target: string
  readonly rps: number
  /** PostgreSQL CPU µs per request (backends of the target). */
  readonly pgMicros: number
  /** Node CPU µs per request (openbook servers only). */
  readonly nodeMicros: number | null
  readonly otherCpu: number
  readonly failures: number
}

/** Per target, the median of its rounds. */
function summarize(targets: readonly string[], rounds: readonly Round[]) {
  return targets.map((name) => {
    const mine = rounds.filter((r) => r.target === name)
    const nodes = mine.flatMap((r) => (r.nodeMicros === null ? [] : [r.nodeMicros]))
    return {
      target: name,
      rps: median(mine.map((r) => r.rps)),
      pgMicros: median(mine.map((r) => r.pgMicros)),
      nodeMicros: nodes.length ? median(nodes) : null,
      otherCpu: median(mine.map((r) => r.otherCpu)),
      failures: mine.reduce((sum, r) => sum + r.failures, 0),
    }
  })
}

/** Seconds of a pgbench run before it is metered. */
const PGBENCH_WARMUP_S = 1

const PACED_SUFFIX = '-paced'

const perRequest = (cpuPercent: number, rps: number) =>
  rps > 0 ? ((cpuPercent / 100) * 1e6) / rps : Number.NaN

async function main(): Promise<void> {
  // `--no-ladder`: of the pgbench scripts only the ceiling and the paced pair (more rounds in the same time).
  const argv = process.argv.slice(2)
  const pacedLadder = argv.includes('--paced-ladder')
  const ladder = !argv.includes('--no-ladder') && !pacedLadder
  const options = parseOptions(argv.filter((arg) => arg !== '--no-ladder' && arg !== '--paced-ladder'))
  const scripts = ladder ? PGBENCH : [CEILING]
  // Run again at openbook's req/s: the ceiling and openbook's own message, or the paced ladder.
  const pacedScripts = pacedLadder ? PACED_LADDER : [CEILING, MESSAGE]
  const serverKinds = pacedLadder ? SERVERS.filter((s) => !s.technique && !s.env) : SERVERS
  const only = options.only ?? DEFAULT_MIXES
  const settings: LoadSettings = {
    duration: options.duration ?? 3,
    rounds: options.rounds,
    warmup: options.warmup,
    connections: options.connections,
    poolSize: options.poolSize,
  }
  const preload = pathToFileURL(resolve('bench/technique-off.mjs')).href
  const report: Record<string, unknown>[] = []
  for (const scale of options.scales) {
    const data: DataSet = { pgUrl: options.pgUrl, scale, cliDir: options.openbookDir, fresh: false }
    const { monitor, mixes } = await prepareMixes(data, log, { only })
    stops.push(() => monitor.end())
    const url = databaseUrl(data)

    const servers: Target[] = []
    for (const server of serverKinds) {
      const target = await startOpenbook(server.name, options.openbookDir, url, {
        env: { ...server.env, ...(server.technique ? { BENCH_TECHNIQUE_OFF: server.technique } : {}) },
        ...(server.technique ? { preload } : {}),
      })
      stops.push(target.service.stop)
      servers.push(target)
    }
    if (options.previousDir) {
      const previous = await startOpenbook('previous', options.previousDir, url)
      stops.push(previous.service.stop)
      servers.push(previous)
    }
    // Every variant answers every mix with the same bytes as openbook.
    for (const mix of mixes) {
      const bodies = await Promise.all(
        servers.map(async (server) => {
          const response = await fetch(server.baseUrl + mix.path, {
            headers: { authorization: `Bearer ${mix.org.key}` },
          })
          return `${response.status} ${await response.text()}`
        }),
      )
      const [expected = ''] = bodies
      if (!expected.startsWith('200 '))
        throw new Error(`${mix.id}: openbook answers ${expected.slice(0, 120)}`)
      bodies.forEach((body, i) => {
        if (body !== expected)
          throw new Error(`${mix.id}: ${servers[i]?.name} answers otherwise: ${body.slice(0, 120)}`)
      })
    }

    const runs = new Map<string, PgbenchRun>()
    for (const mix of mixes) {
      const statements = await captureStatements(mix.org.key, mix.org.id, mix.request)
      for (const variant of new Set([...scripts, ...pacedScripts])) {
        const run = pgbenchRun(variant, statements, mix.org.id)
        const file = join(workDir, `${scale.name}-${mix.id}-${variant.name}.sql`)
        writeFileSync(file, run.script)
        runs.set(`${mix.id} ${variant.name}`, run)
      }
    }
    const pgbenchOf = (mix: Mix, variant: PgbenchVariant, seconds: number, rate?: number): PgbenchLoad => {
      const found = runs.get(`${mix.id} ${variant.name}`)
      if (!found) throw new Error(`no pgbench script for ${mix.id} ${variant.name}`)
      const { script: _script, ...run } = found
      return {
        ...run,
        databaseUrl: url,
        scriptFile: join(workDir, `${scale.name}-${mix.id}-${variant.name}.sql`),
        clients: settings.poolSize,
        seconds,
        ...(rate === undefined ? {} : { rate }),
        applicationName: `openbook-bench-${variant.name}${rate === undefined ? '' : PACED_SUFFIX}`,
      }
    }

    log(`${scale.name}: warming every target on every mix`)
    for (const mix of mixes) {
      for (const variant of scripts) await pgbenchLoad(pgbenchOf(mix, variant, Math.max(1, settings.warmup)))
    }
    const paths = mixes.map((mix) => ({ path: mix.path, key: mix.org.key }))
    for (const server of servers) await warmServer(server, paths, settings)

    const paced = pacedScripts.map((variant) => ({ name: variant.name + PACED_SUFFIX, variant }))
    // The paced scripts right after openbook: in most rounds they run at the rate it has just had.
    const [first, ...others] = servers.map((s) => s.name)
    const targets = [first ?? '', ...paced.map((p) => p.name), ...others, ...scripts.map((v) => v.name)]
    const openbook = servers[0] as Target
    for (const [index, mix] of mixes.entries()) {
      const loadStart = loadavg()
      log(`${scale.name} ${mix.id}: ${mix.path} (load ${loadStart.map((v) => v.toFixed(2)).join(' ')})`)
      const rounds: Round[] = []
      // The pace: openbook's req/s on this mix in its latest round (before its first, in a
      // measurement of its own): a rate that drifts over the run is followed round by round.
      const pace = await saturate(openbook, mix.path, mix.org.key, settings, monitor, true)
      const openbookRate = () =>
        rounds.filter((r) => r.target === openbook.name && r.failures === 0).at(-1)?.rps ?? pace.rps
      for (let round = 0; round < settings.rounds; round++) {
        for (let turn = 0; turn < targets.length; turn++) {
          const name = targets[(index + round + turn) % targets.length] ?? ''
          const server = servers.find((s) => s.name === name)
          if (server) {
            // After `warmup` s of load: the pool's connections open and their statements prepared.
            const r = await saturate(server, mix.path, mix.org.key, settings, monitor, true)
            rounds.push({
              target: name,
              rps: r.rps,
              pgMicros: perRequest(r.postgresCpu, r.rps),
              nodeMicros: r.serverCpu === null ? null : perRequest(r.serverCpu, r.rps),
              otherCpu: r.otherCpu,
              failures: r.failures,
            })
          } else {
            const pacedVariant = paced.find((p) => p.name === name)?.variant
            const variant = pacedVariant ?? scripts.find((v) => v.name === name)
            if (!variant) continue
            await quiesce(monitor)
            // Metered from its second second on: its connections open in the first.
            const load = pgbenchOf(
              mix,
              variant,
              settings.duration + PGBENCH_WARMUP_S,
              pacedVariant ? openbookRate() : undefined,
            )
            const m = await metered(
              undefined,
              backendPids(monitor, load.applicationName),
              () => pgbenchLoad(load),
              PGBENCH_WARMUP_S * 1000,
            )
            rounds.push({
              target: name,
              rps: m.result.rps,
              pgMicros: perRequest(m.usage.postgresCpu, m.result.rps),
              nodeMicros: null,
              otherCpu: m.usage.otherCpu,
              failures: m.result.failures,
            })
          }
        }
      }
      const loadEnd = loadavg()
      const summary = summarize(targets, rounds)
      for (const s of summary) {
        log(
          `  ${s.target.padEnd(20)} ${Math.round(s.rps).toString().padStart(6)}/s  pg ${Math.round(s.pgMicros)} µs` +
            `${s.nodeMicros === null ? '' : `  node ${Math.round(s.nodeMicros)} µs`}  others ${Math.round(s.otherCpu)}%` +
            `${s.failures ? `  FAILURES ${s.failures}` : ''}`,
        )
      }
      report.push({
        scale: scale.name,
        mix: mix.id,
        path: mix.path,
        org: mix.org.id,
        loadStart,
        loadEnd,
        summary,
        rounds,
      })
      mkdirSync('bench/results', { recursive: true })
      writeFileSync(
        'bench/results/yardstick.json',
        `${JSON.stringify({ command: process.argv.slice(2), settings, report }, null, 2)}\n`,
      )
    }
    for (const server of servers) await server.service.stop()
  }
  log('done: bench/results/yardstick.json')
}

try {
  await main()
} catch (error) {
  log(`failed: ${(error as Error).stack ?? error}`)
  process.exitCode = 1
} finally {
  await cleanUp()
}
