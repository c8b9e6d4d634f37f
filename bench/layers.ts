/**
 * Where openbook's Node CPU a request goes beyond the minimal handler's: five servers on the same
 * pages of a seeded database's largest organization, each alone at saturation in rounds that take
 * turns, Node's CPU a request (the server process, from /proc) and PostgreSQL's (its backends):
 *
 * - `server`: openbook as `npm start` runs it (dist/server.js);
 * - `app`: openbook's app (Fastify, hooks, metrics) over its PostgreSQL store, in
 *   bench/framework-overhead.ts;
 * - `fastify`: bare Fastify (one route, none of openbook's plugins) over the same store work as
 *   `store`, in the same file;
 * - `store`: openbook's PostgreSQL store and page statements without the framework (the same file's
 *   minimal mode: node:http, the key lookup with the page in one trip);
 * - `minimal`: the minimal handler (bench/baseline-server.ts: node:http and pg).
 *
 * `app` − `fastify` is openbook's plugins' and route's part, `fastify` − `store` Fastify's own,
 * `store` − `minimal` the store's. Every one shares its connections as the server does (4 requests
 * a connection, a pool of 10).
 *
 *   npm run build && node --import tsx bench/layers.ts [DATABASE_URL] [--rounds 3] [--seconds 4]
 *     [--servers server,app,fastify,store,minimal]
 */
import { parseArgs } from 'node:util'
import pg from 'pg'
import { PIPELINE_DEPTH } from '../src/store/postgres/pipeline.js'
import { largestOrgWithKey } from './bench-org.js'
import { httpLoad } from './load.js'
import { backendPids, metered, quiesce } from './meter.js'
import { runFromRoot } from './paths.js'
import { freePort, type Service, startService } from './proc.js'

runFromRoot()
const { values, positionals } = parseArgs({
  options: {
    rounds: { type: 'string', default: '3' },
    seconds: { type: 'string', default: '4' },
    servers: { type: 'string', default: 'server,app,fastify,store,minimal' },
  },
  allowPositionals: true,
})
const url = positionals[0] ?? 'postgres://root@127.0.0.1:5432/openbook_bench_100k'
const PAGES = ['/api/public/v1/customers?limit=1', '/api/public/v1/customers?limit=50&offset=100']
const SERVERS: Record<string, readonly string[]> = {
  server: ['dist/server.js'],
  app: ['--import', 'tsx', 'bench/framework-overhead.ts'],
  fastify: ['--import', 'tsx', 'bench/framework-overhead.ts'],
  store: ['--import', 'tsx', 'bench/framework-overhead.ts'],
  minimal: ['--import', 'tsx', 'bench/baseline-server.ts'],
}
const servers = values.servers.split(',')
for (const name of servers) if (!SERVERS[name]) throw new Error(`no server ${name}: ${Object.keys(SERVERS)}`)

/** One of the servers, as the other benchmarks start theirs (proc.ts). */
async function start(name: string): Promise<Service> {
  const port = await freePort()
  return startService(
    process.execPath,
    SERVERS[name] ?? [],
    {
      PATH: process.env.PATH,
      PORT: String(port),
      HOST: '127.0.0.1',
      LOG_LEVEL: 'warn',
      OPS_PORT: '0',
      DATABASE_URL: `${url}?application_name=openbook-bench-layers-${name}`,
      MODE: name === 'store' ? 'minimal' : name === 'fastify' ? 'fastify' : 'openbook',
      PIPELINE_DEPTH: String(PIPELINE_DEPTH),
      POOL_SIZE: '10',
    },
    port,
  )
}

const org = await largestOrgWithKey(url)
const monitor = new pg.Client({ connectionString: url })
await monitor.connect()
const results = new Map<string, { node: number[]; postgres: number[] }>()
try {
  for (let round = 1; round <= Number(values.rounds); round++) {
    for (const name of round % 2 === 1 ? servers : [...servers].reverse()) {
      const server = await start(name)
      try {
        for (const page of PAGES) {
          const load = {
            url: `http://127.0.0.1:${server.port}${page}`,
            headers: { authorization: `Bearer ${org.key}` },
            connections: 16,
          }
          await quiesce(monitor)
          await httpLoad({ ...load, seconds: 2 })
          const { result, usage } = await metered(
            server.pid,
            backendPids(monitor, `openbook-bench-layers-${name}`),
            () => httpLoad({ ...load, seconds: Number(values.seconds) }),
          )
          if (result.failures > 0) throw new Error(`${name} ${page}: ${result.failures} failures`)
          const perRequest = (percent: number) => (percent / 100 / result.rps) * 1e6
          const key = `${page}\t${name}`
          const entry = results.get(key) ?? { node: [], postgres: [] }
          entry.node.push(perRequest(usage.serverCpu ?? 0))
          entry.postgres.push(perRequest(usage.postgresCpu))
          results.set(key, entry)
          console.log(
            `round ${round} ${name} ${page}: ${result.rps.toFixed(0)} req/s, Node ${entry.node.at(-1)?.toFixed(0)} µs, ` +
              `PostgreSQL ${entry.postgres.at(-1)?.toFixed(0)} µs a request`,
          )
        }
      } finally {
        await server.stop()
      }
    }
  }
} finally {
  await monitor.end()
  await org.revoke()
}

const spread = (all: number[]) => {
  const sorted = [...all].sort((a, b) => a - b)
  const median = sorted[Math.floor(sorted.length / 2)] ?? Number.NaN
  return `${median.toFixed(0)} (${sorted[0]?.toFixed(0)}-${sorted.at(-1)?.toFixed(0)})`
}
console.log('\n| page | server | Node µs/req | PostgreSQL µs/req |')
console.log('| --- | --- | ---: | ---: |')
for (const [key, { node, postgres }] of results) {
  const [page, name] = key.split('\t')
  console.log(`| ${page} | ${name} | ${spread(node)} | ${spread(postgres)} |`)
}
