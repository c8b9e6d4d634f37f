/**
 * openbook on PostgreSQL with glibc's malloc arenas as glibc sets them (`MALLOC_ARENA_MAX=0`: up
 * to eight a core) and as `npm start` sets them (two): the largest organization's customers page,
 * identity and the shipped client's `Accept-Encoding`, in rounds that take turns; req/s, Node's
 * CPU a request and the server's peak RSS. The embedded store's side: bench/embedded-memory.ts.
 *
 *   npm run build && node --import tsx bench/malloc-arenas.ts [DATABASE_URL] [--rounds 3] [--seconds 6]
 */
import { readFileSync } from 'node:fs'
import { parseArgs } from 'node:util'
import { ACCEPT_ENCODING } from '../packages/client/src/transport.js'
import { largestOrgWithKey } from './bench-org.js'
import { httpLoad } from './load.js'
import { runFromRoot } from './paths.js'
import { cpuSeconds } from './proc.js'
import { startOpenbook } from './servers.js'

runFromRoot()
const { values, positionals } = parseArgs({
  options: { rounds: { type: 'string', default: '3' }, seconds: { type: 'string', default: '6' } },
  allowPositionals: true,
})
const url = positionals[0] ?? 'postgres://root@127.0.0.1:5432/openbook_bench_100k'
const org = await largestOrgWithKey(url)
const peakRssMb = (pid: number) =>
  Math.round(Number(/VmHWM:\s+(\d+)/.exec(readFileSync(`/proc/${pid}/status`, 'utf8'))?.[1] ?? 0) / 1024)

for (let round = 1; round <= Number(values.rounds); round++)
  for (const arenas of ['0', '2'])
    for (const encoding of ['identity', ACCEPT_ENCODING]) {
      const target = await startOpenbook(`arenas-${arenas}`, '.', url, { env: { MALLOC_ARENA_MAX: arenas } })
      try {
        const load = {
          url: `${target.baseUrl}/api/public/v1/customers?limit=50&offset=100`,
          headers: { authorization: `Bearer ${org.key}`, 'accept-encoding': encoding },
          connections: 16,
        }
        await httpLoad({ ...load, seconds: 2 })
        const before = cpuSeconds(target.service.pid) ?? 0
        const result = await httpLoad({ ...load, seconds: Number(values.seconds) })
        const cpu = (cpuSeconds(target.service.pid) ?? 0) - before
        console.log(
          `round ${round}, MALLOC_ARENA_MAX=${arenas}, ${encoding}: ${result.rps.toFixed(0)} req/s, ` +
            `Node ${((cpu / Math.max(1, result.ok)) * 1e6).toFixed(0)} µs a request, ` +
            `peak RSS ${peakRssMb(target.service.pid)} MB, ${result.failures} failures`,
        )
      } finally {
        await target.service.stop()
      }
    }
