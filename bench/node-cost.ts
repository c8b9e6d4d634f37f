/**
 * Node's CPU a request, this build against another (`--against DIR`, a worktree of a commit, built),
 * on the same pages of a seeded database's largest organization: each server in turn, identity and
 * the shipped client's `Accept-Encoding`, in rounds that take turns (the order flips each round);
 * req/s at saturation, Node's CPU a request (the server process, from /proc) and PostgreSQL's (the
 * backends of its connections). A technique that moves Node's work into the database shows as both.
 * `--together` loads the builds at the same time, each through its own connections, so that the
 * machine's other work falls on both alike (their ratio, round by round, is the figure to read).
 * `--profile DIR` writes a V8 CPU profile of each server run instead (one round).
 * `--env` and `--against-env` (`NAME=value,…`) set each build's environment: with `--against-env`
 * alone, the same build is weighed against itself under another setting (`DATABASE_POOL_SIZE=4`).
 * `--half` also loads each page at half the rate it saturated at (evenly spaced, bench/paced.ts)
 * and reports the latency there. A page is a name below or a path and query under /api/public/v1.
 *
 *   npm run build && node --import tsx bench/node-cost.ts [DATABASE_URL] --against DIR
 *     [--rounds 5] [--seconds 5] [--connections 16] [--pages customers-50,/appointments?…,…]
 *     [--together] [--half] [--env NAME=value,…] [--against-env NAME=value,…]
 */
import { resolve } from 'node:path'
import { parseArgs } from 'node:util'
import pg from 'pg'
import { ACCEPT_ENCODING } from '../packages/client/src/transport.js'
import { largestOrgWithKey } from './bench-org.js'
import { httpLoad } from './load.js'
import { backendPids, metered, quiesce } from './meter.js'
import { parseEnvList } from './options.js'
import { pacedLoad } from './paced.js'
import { runFromRoot } from './paths.js'
import { startOpenbook, type Target } from './servers.js'

runFromRoot()
const { values, positionals } = parseArgs({
  options: {
    against: { type: 'string' },
    rounds: { type: 'string', default: '5' },
    seconds: { type: 'string', default: '5' },
    connections: { type: 'string', default: '16' },
    pages: { type: 'string' },
    profile: { type: 'string' },
    together: { type: 'boolean', default: false },
    half: { type: 'boolean', default: false },
    env: { type: 'string', default: '' },
    'against-env': { type: 'string' },
  },
  allowPositionals: true,
})
const url = positionals[0] ?? 'postgres://root@127.0.0.1:5432/openbook_bench_100k'

/** The pages: a path and query of the public API, by name. */
const PAGES: Record<string, string> = {
  'customers-1': '/customers?limit=1',
  'customers-50': '/customers?limit=50&offset=100',
  'customers-100': '/customers?limit=100&offset=2000',
  'appointments-50': '/appointments?limit=50&offset=100',
  'appointments-status-50': '/appointments?limit=50&status=confirmed',
}
const pages = values.pages ? values.pages.split(',') : Object.keys(PAGES)
for (const page of pages)
  if (!PAGES[page] && !page.startsWith('/'))
    throw new Error(`no page ${page}: ${Object.keys(PAGES).join(', ')}, or a path`)
if (values.half && values.together) throw new Error('--half loads one build at a time: not with --together')
const against = values.against ?? (values['against-env'] === undefined ? undefined : '.')
const builds = [
  { name: 'this', dir: '.', env: parseEnvList(values.env) },
  ...(against ? [{ name: 'against', dir: against, env: parseEnvList(values['against-env'] ?? '') }] : []),
]
const encodings = ['identity', ACCEPT_ENCODING]
const rounds = values.profile ? 1 : Number(values.rounds)

const org = await largestOrgWithKey(url)
const monitor = new pg.Client({ connectionString: url })
await monitor.connect()
type Figures = { rps: number; nodeUs: number; postgresUs: number; halfP50?: number; halfP99?: number }
/** Each page's figures by build, a list of one entry a round. */
const results = new Map<string, Figures[]>()
const keyOf = (page: string, encoding: string, build: string) => `${page}\t${encoding}\t${build}`

interface Running {
  readonly build: (typeof builds)[number]
  readonly target: Target
}

async function start(build: (typeof builds)[number]): Promise<Running> {
  // OPS_PORT 0: each server's operations listener on a free port of its own.
  const variant = values.profile
    ? {
        preload: resolve('bench/cpu-profile.mjs'),
        env: {
          ...build.env,
          OPS_PORT: '0',
          CPU_PROFILE_FILE: resolve(values.profile, `${build.name}.cpuprofile`),
        },
      }
    : { env: { ...build.env, OPS_PORT: '0' } }
  return { build, target: await startOpenbook(`cost-${build.name}`, build.dir, url, variant) }
}

const loadOf = ({ target }: Running, page: string, encoding: string) => ({
  url: `${target.baseUrl}/api/public/v1${PAGES[page] ?? page}`,
  headers: { authorization: `Bearer ${org.key}`, 'accept-encoding': encoding },
  connections: Number(values.connections),
})

/**
 * Every page once before any is measured: V8's compiler threads count in the process's CPU, and a
 * new server compiles its hot paths in its first seconds.
 */
async function warm(running: Running): Promise<void> {
  for (const page of pages)
    for (const encoding of encodings) await httpLoad({ ...loadOf(running, page, encoding), seconds: 1 })
}

async function measure(running: Running, page: string, encoding: string, round: number): Promise<void> {
  const { build, target } = running
  const load = loadOf(running, page, encoding)
  const { result, usage } = await metered(
    target.service.pid,
    backendPids(monitor, `openbook-bench-cost-${build.name}`),
    () => httpLoad({ ...load, seconds: Number(values.seconds) }),
  )
  if (result.failures > 0) throw new Error(`${build.name} ${page}: ${result.failures} failures`)
  const perRequest = (percent: number) => (percent / 100 / result.rps) * 1e6
  const half = values.half
    ? await pacedLoad({ ...load, seconds: Number(values.seconds), rate: Math.round(result.rps / 2) })
    : undefined
  if (half?.failures) throw new Error(`${build.name} ${page}: ${half.failures} failures at half load`)
  const figures: Figures = {
    rps: result.rps,
    nodeUs: perRequest(usage.serverCpu ?? 0),
    postgresUs: perRequest(usage.postgresCpu),
    ...(half?.p50 != null && half.p99 != null ? { halfP50: half.p50, halfP99: half.p99 } : {}),
  }
  const key = keyOf(page, encoding, build.name)
  results.set(key, [...(results.get(key) ?? []), figures])
  console.log(
    `round ${round} ${build.name} ${page} ${encoding}: ${figures.rps.toFixed(0)} req/s, ` +
      `Node ${figures.nodeUs.toFixed(0)} µs, PostgreSQL ${figures.postgresUs.toFixed(0)} µs a request` +
      (figures.halfP50 === undefined
        ? ''
        : `; at ${Math.round(figures.rps / 2)} req/s p50 ${figures.halfP50.toFixed(2)} ms, p99 ${figures.halfP99?.toFixed(2)} ms`),
  )
}

try {
  for (let round = 1; round <= rounds; round++) {
    const order = round % 2 === 1 ? builds : [...builds].reverse()
    if (values.together) {
      // All builds loaded at once, each through its own connections: a burst of other work on the
      // machine falls on all of them in the same seconds, and their ratio stays.
      const running = await Promise.all(order.map(start))
      try {
        for (const each of running) await warm(each)
        for (const page of pages)
          for (const encoding of encodings) {
            await quiesce(monitor)
            await Promise.all(
              running.map((each) => httpLoad({ ...loadOf(each, page, encoding), seconds: 1 })),
            )
            await Promise.all(running.map((each) => measure(each, page, encoding, round)))
          }
      } finally {
        await Promise.all(running.map(({ target }) => target.service.stop()))
      }
      continue
    }
    for (const build of order) {
      const running = await start(build)
      try {
        await warm(running)
        for (const page of pages)
          for (const encoding of encodings) {
            await quiesce(monitor)
            await httpLoad({ ...loadOf(running, page, encoding), seconds: 1 })
            await measure(running, page, encoding, round)
          }
      } finally {
        await running.target.service.stop()
      }
    }
  }
} finally {
  await monitor.end()
  await org.revoke()
}

const median = (numbers: number[]) => {
  const sorted = [...numbers].sort((a, b) => a - b)
  return sorted[Math.floor(sorted.length / 2)] ?? Number.NaN
}
const halfColumn = values.half ? ' p50 ms at half the rate |' : ''
console.log(`\n| page | Accept-Encoding | build | req/s | Node µs/req | PostgreSQL µs/req |${halfColumn}`)
console.log(`| --- | --- | --- | ---: | ---: | ---: |${values.half ? ' ---: |' : ''}`)
for (const [key, figures] of results) {
  const [page, encoding, build] = key.split('\t')
  const cell = (pick: (f: Figures) => number, digits = 0) => {
    const all = figures.map(pick)
    return `${median(all).toFixed(digits)} (${Math.min(...all).toFixed(digits)}-${Math.max(...all).toFixed(digits)})`
  }
  console.log(
    `| ${page} | ${encoding} | ${build} | ${cell((f) => f.rps)} | ${cell((f) => f.nodeUs)} | ${cell((f) => f.postgresUs)} |` +
      (values.half ? ` ${cell((f) => f.halfP50 ?? Number.NaN, 2)} |` : ''),
  )
}

if (builds.length === 2) {
  console.log(
    '\n| page | Accept-Encoding | this ÷ against, Node µs/req: median of the rounds (range) | PostgreSQL µs/req |',
  )
  console.log('| --- | --- | ---: | ---: |')
  for (const page of pages)
    for (const encoding of encodings) {
      const mine = results.get(keyOf(page, encoding, 'this')) ?? []
      const theirs = results.get(keyOf(page, encoding, 'against')) ?? []
      const ratios = (pick: (f: Figures) => number) =>
        mine.map((figures, round) => pick(figures) / pick(theirs[round] ?? figures))
      const cell = (all: number[]) =>
        `${median(all).toFixed(2)} (${Math.min(...all).toFixed(2)}-${Math.max(...all).toFixed(2)})`
      console.log(
        `| ${page} | ${encoding} | ${cell(ratios((f) => f.nodeUs))} | ${cell(ratios((f) => f.postgresUs))} |`,
      )
    }
}
