/**
 * openbook on PostgreSQL with a `NODE_OPTIONS` value against the same build without it: one page
 * of a seeded database's largest organization at saturation, identity and the shipped client's
 * `Accept-Encoding`, in rounds that take turns (the order flips each round); req/s and Node's CPU
 * a request (the server process, from /proc), then each one's median over the rounds.
 *
 *   npm run build && node --import tsx bench/node-options.ts [DATABASE_URL]
 *     [--options --max-semi-space-size=4] [--rounds 5] [--seconds 5] [--path /api/public/v1/customers?limit=50]
 */
import { parseArgs } from 'node:util'
import { ACCEPT_ENCODING } from '../packages/client/src/transport.js'
import { largestOrgWithKey } from './bench-org.js'
import { httpLoad } from './load.js'
import { runFromRoot } from './paths.js'
import { cpuSeconds } from './proc.js'
import { startOpenbook } from './servers.js'

runFromRoot()
const { values, positionals } = parseArgs({
  options: {
    options: { type: 'string', default: '--max-semi-space-size=4' },
    rounds: { type: 'string', default: '5' },
    seconds: { type: 'string', default: '5' },
    path: { type: 'string', default: '/api/public/v1/customers?limit=50' },
  },
  allowPositionals: true,
})
const url = positionals[0] ?? 'postgres://root@127.0.0.1:5432/openbook_bench_100k'
const org = await largestOrgWithKey(url)
const perRequest: Record<string, number[]> = {}

for (let round = 1; round <= Number(values.rounds); round++) {
  const variants = round % 2 ? ['', values.options] : [values.options, '']
  for (const options of variants)
    for (const encoding of ['identity', ACCEPT_ENCODING]) {
      const name = options ? 'with' : 'without'
      const target = await startOpenbook(`options-${name}`, '.', url, { env: { NODE_OPTIONS: options } })
      try {
        const load = {
          url: `${target.baseUrl}${values.path}`,
          headers: { authorization: `Bearer ${org.key}`, 'accept-encoding': encoding },
          connections: 16,
        }
        await httpLoad({ ...load, seconds: 2 })
        const before = cpuSeconds(target.service.pid) ?? 0
        const result = await httpLoad({ ...load, seconds: Number(values.seconds) })
        const us = (((cpuSeconds(target.service.pid) ?? 0) - before) / Math.max(1, result.ok)) * 1e6
        const label = `${options || 'no NODE_OPTIONS'}, ${encoding}`
        perRequest[label] = [...(perRequest[label] ?? []), us]
        console.log(
          `round ${round}, ${label}: ${result.rps.toFixed(0)} req/s, Node ${us.toFixed(0)} µs a request, ` +
            `${result.failures} failures`,
        )
      } finally {
        await target.service.stop()
      }
    }
}
for (const [label, runs] of Object.entries(perRequest)) {
  const sorted = [...runs].sort((a, b) => a - b)
  console.log(
    `${label}: median ${sorted[Math.floor(sorted.length / 2)]?.toFixed(0)} µs a request (${runs.map((us) => us.toFixed(0)).join(', ')})`,
  )
}
