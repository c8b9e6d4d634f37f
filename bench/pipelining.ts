/**
 * What sharing PostgreSQL connections between requests saves (node-postgres's pipeline mode): the
 * minimal handler (bench/baseline-server.ts) with a connection of its own per request from a pool
 * (BEGIN to COMMIT, as the service benchmark runs it) against the same handler with its requests'
 * messages pipelined, several on a connection and those of one turn of the event loop written
 * together. Each variant in turn on the same pages of a seeded database's largest organization, in
 * rounds that take turns: req/s at saturation, the server's CPU a request and PostgreSQL's.
 *
 *   node --import tsx bench/pipelining.ts [DATABASE_URL] [--rounds 4] [--seconds 4]
 *     [--connections 16] [--variants 'name:NAME=value,…;…']
 */
import { parseArgs } from 'node:util'
import pg from 'pg'
import { largestOrgWithKey } from './bench-org.js'
import { httpLoad } from './load.js'
import { backendPids, metered, quiesce } from './meter.js'
import { parseEnvList } from './options.js'
import { runFromRoot } from './paths.js'
import { startBaseline } from './servers.js'

runFromRoot()
const { values, positionals } = parseArgs({
  options: {
    rounds: { type: 'string', default: '4' },
    seconds: { type: 'string', default: '4' },
    connections: { type: 'string', default: '16' },
    pages: { type: 'string', default: 'customers-1,customers-50,appointments-50' },
    variants: {
      type: 'string',
      default: 'pool:POOL_SIZE=10;one10:PIPELINE_DEPTH=1,POOL_SIZE=10;pipe4x2:PIPELINE_DEPTH=4,POOL_SIZE=2',
    },
  },
  allowPositionals: true,
})
const url = positionals[0] ?? 'postgres://root@127.0.0.1:5432/openbook_bench_100k'
const PAGES: Record<string, string> = {
  'customers-1': '/customers?limit=1',
  'customers-50': '/customers?limit=50&offset=100',
  'appointments-50': '/appointments?limit=50&offset=100',
}
const pages = (values.pages ?? '').split(',')
for (const page of pages)
  if (!PAGES[page]) throw new Error(`no page ${page}: ${Object.keys(PAGES).join(', ')}`)
const variants = (values.variants ?? '').split(';').map((text) => {
  const at = text.indexOf(':')
  if (at < 1) throw new Error(`not name:NAME=value,…: ${text}`)
  const env = parseEnvList(text.slice(at + 1))
  return { name: text.slice(0, at), env, poolSize: Number(env.POOL_SIZE ?? 10) }
})

const org = await largestOrgWithKey(url)
const monitor = new pg.Client({ connectionString: url })
await monitor.connect()
type Figures = { rps: number; nodeUs: number; postgresUs: number }
const results = new Map<string, Figures[]>()

try {
  for (let round = 1; round <= Number(values.rounds); round++) {
    const order = round % 2 === 1 ? variants : [...variants].reverse()
    for (const variant of order) {
      const target = await startBaseline(url, variant.poolSize, { name: variant.name, env: variant.env })
      try {
        for (const page of pages) {
          const load = {
            url: `${target.baseUrl}/api/public/v1${PAGES[page]}`,
            headers: { authorization: `Bearer ${org.key}` },
            connections: Number(values.connections),
          }
          await quiesce(monitor)
          await httpLoad({ ...load, seconds: 1 })
          const { result, usage } = await metered(
            target.service.pid,
            backendPids(monitor, target.applicationName),
            () => httpLoad({ ...load, seconds: Number(values.seconds) }),
          )
          if (result.failures > 0) throw new Error(`${variant.name} ${page}: ${result.failures} failures`)
          const perRequest = (percent: number) => (percent / 100 / result.rps) * 1e6
          const figures = {
            rps: result.rps,
            nodeUs: perRequest(usage.serverCpu ?? 0),
            postgresUs: perRequest(usage.postgresCpu),
          }
          const key = `${page}\t${variant.name}`
          results.set(key, [...(results.get(key) ?? []), figures])
          console.log(
            `round ${round} ${variant.name} ${page}: ${figures.rps.toFixed(0)} req/s, Node ${figures.nodeUs.toFixed(0)} µs, ` +
              `PostgreSQL ${figures.postgresUs.toFixed(0)} µs a request, others ${usage.otherCpu.toFixed(0)} %`,
          )
        }
      } finally {
        await target.service.stop()
      }
    }
  }
} finally {
  await monitor.end()
  await org.revoke()
}

const median = (numbers: number[]) =>
  [...numbers].sort((a, b) => a - b)[Math.floor(numbers.length / 2)] ?? Number.NaN
console.log('\n| page | variant | req/s | Node µs/req | PostgreSQL µs/req | Node ÷ PostgreSQL |')
console.log('| --- | --- | ---: | ---: | ---: | ---: |')
for (const page of pages)
  for (const variant of variants) {
    const figures = results.get(`${page}\t${variant.name}`) ?? []
    const cell = (pick: (f: Figures) => number) => {
      const all = figures.map(pick)
      return `${median(all).toFixed(0)} (${Math.min(...all).toFixed(0)}-${Math.max(...all).toFixed(0)})`
    }
    console.log(
      `| ${page} | ${variant.name} | ${cell((f) => f.rps)} | ${cell((f) => f.nodeUs)} | ${cell((f) => f.postgresUs)} | ${median(figures.map((f) => f.nodeUs / f.postgresUs)).toFixed(2)} |`,
    )
  }
