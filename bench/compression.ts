/**
 * `npm run bench:compression -- DATABASE_URL [--seconds 8] [--connections 10]`: what compressed
 * pages cost and save (issue 31, item 9), on a seeded database migrated by this build.
 *
 * 1. The levels: one real page of 100 customers of the largest organization, compressed 300 times
 *    in this process by gzip at levels 1, 4, 6, 9 and brotli at qualities 1, 4, 5, 11 (CPU µs per
 *    page, bytes): why the server uses gzip 4 and brotli 4 (src/plugins/compression.ts).
 * 2. The server: openbook on that database (bench/framework-overhead.ts, MODE=openbook), loaded by
 *    autocannon with pages of 100 customers at 20 offsets, once per Accept-Encoding (none, gzip,
 *    br); the server process's CPU time per request from /proc, its requests per second, and the
 *    bytes of a page on the wire. PostgreSQL's CPU is not in the figure: the same for all three.
 */
import { brotliCompressSync, constants, gzipSync } from 'node:zlib'
import { largestOrgWithKey, REPOSITORY } from './bench-org.js'
import { httpLoad } from './load.js'
import { cpuSeconds, freePort, killAll, startService } from './proc.js'

const args = process.argv.slice(2)
const option = (name: string, fallback: number) => {
  const at = args.indexOf(name)
  return at >= 0 ? Number(args[at + 1]) : fallback
}
const databaseUrl = args.find((arg) => arg.startsWith('postgres')) ?? process.env.DATABASE_URL
if (!databaseUrl) throw new Error('give the seeded database: npm run bench:compression -- postgres://…')
const seconds = option('--seconds', 8)
const connections = option('--connections', 10)

const org = await largestOrgWithKey(databaseUrl)
const port = await freePort()
const server = await startService(
  process.execPath,
  ['--import', 'tsx', `${REPOSITORY}bench/framework-overhead.ts`],
  { ...process.env, MODE: 'openbook', PORT: String(port), DATABASE_URL: databaseUrl, LOG_LEVEL: 'warn' },
  port,
)
const base = `http://127.0.0.1:${port}/api/public/v1/customers?limit=100`
const headers = { authorization: `Bearer ${org.key}` }

function cpuMicros<T>(work: () => T): { result: T; micros: number } {
  const before = process.cpuUsage()
  const result = work()
  const used = process.cpuUsage(before)
  return { result, micros: used.user + used.system }
}

try {
  const body = Buffer.from(await (await fetch(base, { headers })).text())
  const lines = [
    `# Compression, ${new Date().toISOString()}`,
    '',
    `Organization ${org.id} (${org.customers} active customers); a page of 100 customers is ${body.length} bytes.`,
    '',
    '| Encoder | Bytes | Ratio | CPU µs per page |',
    '| --- | --- | --- | --- |',
  ]
  const encoders: [string, (input: Buffer) => Buffer][] = [
    ...[1, 4, 6, 9].map((level): [string, (input: Buffer) => Buffer] => [
      `gzip ${level}`,
      (input) => gzipSync(input, { level }),
    ]),
    ...[1, 4, 5, 11].map((quality): [string, (input: Buffer) => Buffer] => [
      `brotli ${quality}`,
      (input) => brotliCompressSync(input, { params: { [constants.BROTLI_PARAM_QUALITY]: quality } }),
    ]),
  ]
  for (const [name, encode] of encoders) {
    encode(body)
    const runs = name === 'brotli 11' ? 30 : 300
    const { result, micros } = cpuMicros(() => {
      let last: Buffer = body
      for (let i = 0; i < runs; i++) last = encode(body)
      return last
    })
    lines.push(
      `| ${name} | ${result.length} | ${(body.length / result.length).toFixed(1)} | ${(micros / runs).toFixed(0)} |`,
    )
  }

  lines.push('', `openbook, ${connections} connections, ${seconds} s each, pages of 100 at 20 offsets:`, '')
  lines.push(
    '| Accept-Encoding | req/s | server CPU µs/request | bytes per page on the wire |',
    '| --- | --- | --- | --- |',
  )
  for (const encoding of [undefined, 'gzip', 'br', undefined, 'gzip', 'br']) {
    const withEncoding = encoding ? { ...headers, 'accept-encoding': encoding } : headers
    const wire = await fetch(`${base}&offset=1000`, { headers: withEncoding })
    const wireBytes = Number(wire.headers.get('content-length') ?? 0) || (await wire.arrayBuffer()).byteLength
    await httpLoad({ url: `${base}&offset=500`, headers: withEncoding, connections, seconds: 1 })
    const before = cpuSeconds(server.pid) ?? 0
    const load = await httpLoad({ url: `${base}&offset=2000`, headers: withEncoding, connections, seconds })
    const cpu = (cpuSeconds(server.pid) ?? 0) - before
    lines.push(
      `| ${encoding ?? '(none)'} | ${load.rps.toFixed(0)} | ${((cpu * 1e6) / Math.max(1, load.ok)).toFixed(0)} | ${wireBytes} |`,
    )
    if (load.failures > 0) lines.push(`(${load.failures} failures)`)
  }
  process.stdout.write(`${lines.join('\n')}\n`)
} finally {
  await server.stop()
  await org.revoke()
  killAll()
}
