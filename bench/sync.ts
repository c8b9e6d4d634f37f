/**
 * `npm run bench:sync -- DATABASE_URL [--rounds 3] [--dir DIR]`: `openbook-sync customers` to a
 * file against the client's `.all()` over the same organization (the sync within 1.2×
 * of `.all()`), on a seeded database migrated by this build, its largest organization.
 *
 * The server is this build (`node dist/server.js`) on that database. Each round runs, each in its
 * own Node process timed from spawn to exit: `.all()` with its default page (50), `.all()` with
 * pages of 99 new rows (the sync's 100 with its one-row overlap: the same requests), and
 * openbook-sync into a new file in DIR (default: a temporary directory), state and checkpoints
 * as it keeps them by default. The rows are counted, and must match.
 */
import { spawn } from 'node:child_process'
import { mkdtempSync, readFileSync, rmSync, statSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { largestOrgWithKey, REPOSITORY } from './bench-org.js'
import { freePort, killAll, startService } from './proc.js'

const args = process.argv.slice(2)
const option = (name: string) => {
  const at = args.indexOf(name)
  return at >= 0 ? args[at + 1] : undefined
}
const databaseUrl = args.find((arg) => arg.startsWith('postgres')) ?? process.env.DATABASE_URL
if (!databaseUrl) throw new Error('give the seeded database: npm run bench:sync -- postgres://…')
const rounds = Number(option('--rounds') ?? 3)
const directory = mkdtempSync(join(option('--dir') ?? tmpdir(), 'openbook-bench-sync-'))

const CLIENT = join(REPOSITORY, 'packages/client/dist/index.js')
const SYNC = join(REPOSITORY, 'packages/client/bin/openbook-sync.js')

const CPU_REPORT = join(REPOSITORY, 'bench/cpu-report.mjs')
let reports = 0

/**
 * Runs `node args` with the key in OPENBOOK_KEY: its wall time and its own CPU time (user and
 * system, which the machine's other work moves less) in seconds, and its stdout.
 */
function timed(
  nodeArgs: readonly string[],
  key: string,
): Promise<{ seconds: number; cpu: number; stdout: string }> {
  const report = join(directory, `cpu-${++reports}.txt`)
  return new Promise((resolve, reject) => {
    const started = process.hrtime.bigint()
    const child = spawn(process.execPath, ['--import', CPU_REPORT, ...nodeArgs], {
      env: { ...process.env, OPENBOOK_KEY: key, CPU_REPORT_FILE: report },
      stdio: ['ignore', 'pipe', 'pipe'],
    })
    let stdout = ''
    let stderr = ''
    child.stdout.on('data', (chunk: Buffer) => {
      stdout += chunk
    })
    child.stderr.on('data', (chunk: Buffer) => {
      stderr += chunk
    })
    child.once('error', reject)
    child.once('exit', (code) => {
      const seconds = Number(process.hrtime.bigint() - started) / 1e9
      if (code === 0) resolve({ seconds, cpu: Number(readFileSync(report, 'utf8').trim()), stdout })
      else reject(new Error(`node ${nodeArgs.join(' ')} exited ${code}: ${stderr.trim().split('\n').pop()}`))
    })
  })
}

/** `.all()` over the customers in a process of its own, counting the rows; prints the count. */
const allScript = (baseUrl: string, pageSize: number | undefined) => `
import { Openbook } from ${JSON.stringify(CLIENT)}
const openbook = new Openbook({ apiKey: process.env.OPENBOOK_KEY, baseUrl: ${JSON.stringify(baseUrl)} })
let rows = 0
for await (const customer of openbook.customers.all(${pageSize ? `{ pageSize: ${pageSize} }` : ''})) if (customer.id) rows++
process.stdout.write(String(rows))
`

const median = (values: number[]) => [...values].sort((a, b) => a - b)[Math.floor(values.length / 2)] ?? 0

const org = await largestOrgWithKey(databaseUrl)
const port = await freePort()
const server = await startService(
  process.execPath,
  [join(REPOSITORY, 'dist/server.js')],
  {
    ...process.env,
    DATABASE_URL: databaseUrl,
    PORT: String(port),
    HOST: '127.0.0.1',
    OPS_PORT: '0',
    LOG_LEVEL: 'warn',
  },
  port,
  120_000,
)
const baseUrl = `http://127.0.0.1:${port}`
const times: Record<string, number[]> = { all50: [], all99: [], sync: [] }
const cpus: Record<string, number[]> = { all50: [], all99: [], sync: [] }
try {
  for (let round = 1; round <= rounds; round++) {
    for (const [name, pageSize] of [
      ['all50', undefined],
      ['all99', 99],
    ] as const) {
      const run = await timed(['--input-type=module', '-e', allScript(baseUrl, pageSize)], org.key)
      if (Number(run.stdout) !== org.customers)
        throw new Error(`${name}: ${run.stdout} rows, not ${org.customers}`)
      times[name]?.push(run.seconds)
      cpus[name]?.push(run.cpu)
    }
    const out = join(directory, `customers-${round}.ndjson`)
    const run = await timed(
      [SYNC, 'customers', '--base-url', baseUrl, '--out', out, '--key-env', 'OPENBOOK_KEY', '--json'],
      org.key,
    )
    const summary = JSON.parse(run.stdout) as { rows: number; requests: number; checkpoints: number }
    if (summary.rows !== org.customers) throw new Error(`sync: ${summary.rows} rows, not ${org.customers}`)
    times.sync?.push(run.seconds)
    cpus.sync?.push(run.cpu)
    process.stderr.write(
      `round ${round}: all(50) ${times.all50?.at(-1)?.toFixed(2)} s, all(99) ${times.all99?.at(-1)?.toFixed(2)} s, ` +
        `sync ${run.seconds.toFixed(2)} s; CPU all(99) ${cpus.all99?.at(-1)?.toFixed(2)} s, sync ${run.cpu.toFixed(2)} s (${summary.requests} requests, ${summary.checkpoints} checkpoints, ${statSync(out).size} bytes)\n`,
    )
  }
  // Within a round the readers meet the same machine: their ratio moves less than their times.
  const roundRatios = (name: 'all50' | 'all99') =>
    (times.sync ?? []).map((seconds, round) => seconds / (times[name]?.[round] ?? Number.NaN))
  const ratio = (name: 'all50' | 'all99') => median(roundRatios(name))
  const ratios = (name: 'all50' | 'all99') =>
    roundRatios(name)
      .map((r) => r.toFixed(2))
      .join(', ')
  const [all50, all99, sync] = [
    median(times.all50 ?? []),
    median(times.all99 ?? []),
    median(times.sync ?? []),
  ]
  process.stdout.write(
    [
      `# openbook-sync against .all(), ${new Date().toISOString()}`,
      '',
      `Organization ${org.id}, ${org.customers} active customers; ${rounds} rounds, medians; files in ${directory}.`,
      '',
      '| Reader | seconds (median) | rounds |',
      '| --- | --- | --- |',
      `| client .all() (pages of 50) | ${all50.toFixed(2)} | ${times.all50?.map((t) => t.toFixed(2)).join(', ')} |`,
      `| client .all({ pageSize: 99 }) | ${all99.toFixed(2)} | ${times.all99?.map((t) => t.toFixed(2)).join(', ')} |`,
      `| openbook-sync customers --out FILE | ${sync.toFixed(2)} | ${times.sync?.map((t) => t.toFixed(2)).join(', ')} |`,
      `| CPU of .all({ pageSize: 99 }) | ${median(cpus.all99 ?? []).toFixed(2)} | ${cpus.all99?.map((t) => t.toFixed(2)).join(', ')} |`,
      `| CPU of openbook-sync | ${median(cpus.sync ?? []).toFixed(2)} | ${cpus.sync?.map((t) => t.toFixed(2)).join(', ')} |`,
      '',
      `openbook-sync over .all() with the same requests, median of the rounds' ratios: ${ratio('all99').toFixed(2)}× ` +
        `(rounds ${ratios('all99')}); over .all() with its defaults: ${ratio('all50').toFixed(2)}× (rounds ${ratios('all50')}). ` +
        'Target: at most 1.2×.',
      '',
    ].join('\n'),
  )
} finally {
  await server.stop()
  await org.revoke()
  rmSync(directory, { recursive: true, force: true })
  killAll()
}
