/**
 * `npm run bench:compression -- DATABASE_URL [--seconds 8] [--rounds 3] [--connections 10]`: what compressed
 * pages cost and save, on a seeded database migrated by this build.
 *
 * 1. The levels: one real page of 100 customers of the largest organization, compressed 360 times
 *    in this process by gzip at levels 1, 2, 4, 6, 9 and brotli at qualities 0, 1, 2, 4, 5, 11 (CPU
 *    µs per page, the median of 6 interleaved batches; bytes): what the levels of
 *    src/plugins/compression.ts cost and save.
 * 2. The server: openbook on that database (bench/framework-overhead.ts, MODE=openbook), loaded by
 *    autocannon with pages of 100 customers, per Accept-Encoding (identity, gzip, br, and the
 *    shipped client's own header) in rounds that take turns; the server process's CPU time per
 *    request from /proc, its requests per
 *    second, and the bytes of the page on the wire (read raw, not decoded). PostgreSQL's CPU is not
 *    in the figure: the same for all three.
 */
import { request } from 'node:http'
import { brotliCompressSync, constants, gzipSync } from 'node:zlib'
import { ACCEPT_ENCODING } from '../packages/client/src/transport.js'
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
const rounds = option('--rounds', 3)

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

/** A GET, tried twice: the server closes a keep-alive connection idle for 5 s, which fetch may reuse just then. */
async function get(url: string, headers: Record<string, string>): Promise<Response> {
  try {
    return await fetch(url, { headers })
  } catch {
    return fetch(url, { headers })
  }
}

/** The bytes of an answer's body as they cross the wire (not decoded), and its Content-Encoding. */
function wireBytes(
  url: string,
  headers: Record<string, string>,
): Promise<{ bytes: number; encoding: string }> {
  return new Promise((resolve, reject) => {
    const req = request(url, { headers }, (res) => {
      let bytes = 0
      res.on('data', (chunk: Buffer) => {
        bytes += chunk.length
      })
      res.on('end', () => resolve({ bytes, encoding: String(res.headers['content-encoding'] ?? 'identity') }))
      res.on('error', reject)
    })
    req.on('error', reject)
    req.end()
  })
}

const median = (values: number[]) => [...values].sort((a, b) => a - b)[Math.floor(values.length / 2)] ?? 0

function cpuMicros<T>(work: () => T): { result: T; micros: number } {
  const before = process.cpuUsage()
  const result = work()
  const used = process.cpuUsage(before)
  return { result, micros: used.user + used.system }
}

try {
  const body = Buffer.from(await (await get(base, headers)).text())
  const lines = [
    `# Compression, ${new Date().toISOString()}`,
    '',
    `Organization ${org.id} (${org.customers} active customers); a page of 100 customers is ${body.length} bytes.`,
    '',
    '| Encoder | Bytes | Ratio | CPU µs per page |',
    '| --- | --- | --- | --- |',
  ]
  const encoders: [string, (input: Buffer) => Buffer][] = [
    ...[1, 2, 4, 6, 9].map((level): [string, (input: Buffer) => Buffer] => [
      `gzip ${level}`,
      (input) => gzipSync(input, { level }),
    ]),
    ...[0, 1, 2, 4, 5, 11].map((quality): [string, (input: Buffer) => Buffer] => [
      `brotli ${quality}`,
      (input) => brotliCompressSync(input, { params: { [constants.BROTLI_PARAM_QUALITY]: quality } }),
    ]),
  ]
  // Interleaved batches, the median of each encoder's: the machine's other work moves single runs.
  const perPage: Record<string, number[]> = Object.fromEntries(encoders.map(([name]) => [name, []]))
  const sizes: Record<string, number> = {}
  for (let batch = 0; batch < 7; batch++) {
    for (const [name, encode] of encoders) {
      const runs = name === 'brotli 11' ? 5 : 60
      const { result, micros } = cpuMicros(() => {
        let last: Buffer = body
        for (let i = 0; i < runs; i++) last = encode(body)
        return last
      })
      sizes[name] = result.length
      if (batch > 0) perPage[name]?.push(micros / runs)
    }
  }
  for (const [name] of encoders) {
    const bytes = sizes[name] ?? 1
    lines.push(
      `| ${name} | ${bytes} | ${(body.length / bytes).toFixed(1)} | ${median(perPage[name] ?? []).toFixed(0)} |`,
    )
  }

  lines.push(
    '',
    `openbook, ${connections} connections, ${rounds} rounds of ${seconds} s per encoding, taking turns; pages of 100 at offset 2000; medians:`,
    '',
  )
  lines.push(
    '| Accept-Encoding | Content-Encoding | bytes on the wire | req/s | server CPU µs/request | rounds (µs/request) |',
    '| --- | --- | --- | --- | --- | --- |',
  )
  const url = `${base}&offset=2000`
  const encodings = ['identity', 'gzip', 'br', ACCEPT_ENCODING] as const
  const measured = Object.fromEntries(
    encodings.map((e) => [e, { rps: [] as number[], micros: [] as number[] }]),
  )
  for (let round = 0; round < rounds; round++) {
    for (const encoding of encodings) {
      const withEncoding = { ...headers, 'accept-encoding': encoding }
      await httpLoad({ url, headers: withEncoding, connections, seconds: 1 })
      const before = cpuSeconds(server.pid) ?? 0
      const load = await httpLoad({ url, headers: withEncoding, connections, seconds })
      const cpu = (cpuSeconds(server.pid) ?? 0) - before
      if (load.failures > 0) throw new Error(`${encoding}: ${load.failures} failures`)
      measured[encoding]?.rps.push(load.rps)
      measured[encoding]?.micros.push((cpu * 1e6) / Math.max(1, load.ok))
    }
  }
  for (const encoding of encodings) {
    const wire = await wireBytes(url, { ...headers, 'accept-encoding': encoding })
    const { rps, micros } = measured[encoding] ?? { rps: [], micros: [] }
    lines.push(
      `| ${encoding} | ${wire.encoding} | ${wire.bytes} | ${median(rps).toFixed(0)} | ${median(micros).toFixed(0)} | ${micros.map((m) => m.toFixed(0)).join(', ')} |`,
    )
  }
  process.stdout.write(`${lines.join('\n')}\n`)
} finally {
  await server.stop()
  await org.revoke()
  killAll()
}
