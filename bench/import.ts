/**
 * npm run bench:import: writes a realistic NDJSON file (1,000,000 lines by default) and times
 * `openbook import FILE` into a fresh PostgreSQL database; a file a fifth the size shows whether
 * memory grows with the file; a small file with one bad line last shows the import is all-or-nothing.
 */
import { existsSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { parseArgs } from 'node:util'
import pg from 'pg'
import { backendPids, Meter } from './meter.js'
import { writeNdjson } from './ndjson.js'
import { assertLoopbackUrl } from './options.js'
import { runFromRoot } from './paths.js'
import { killAll, run, runOk } from './proc.js'
import { writeResultsSection } from './report.js'

runFromRoot()

const { values } = parseArgs({
  options: {
    lines: { type: 'string', default: '1000000' },
    pg: { type: 'string', default: process.env.BENCH_PG_URL ?? 'postgres://root@127.0.0.1:5432' },
    db: { type: 'string', default: 'openbook_bench_import' },
    'no-write': { type: 'boolean', default: false },
    'no-build': { type: 'boolean', default: false },
  },
})
const LINES = Number(values.lines)
if (!Number.isSafeInteger(LINES) || LINES < 1_000) throw new Error('--lines must be a whole number ≥ 1000')
if (!/^[a-z_][a-z0-9_]{0,62}$/.test(values.db)) throw new Error('--db must be a plain lowercase identifier')
assertLoopbackUrl(values.pg)
const SERVER = values.pg.replace(/\/+$/, '')
const DATABASE_URL = `${SERVER}/${values.db}`
const APPLICATION = 'openbook-bench-import'
const workDir = mkdtempSync(join(tmpdir(), 'openbook-bench-import-'))
const log = (line: string) => process.stderr.write(`${line}\n`)

async function admin(sql: string): Promise<void> {
  const client = new pg.Client({ connectionString: `${SERVER}/postgres` })
  await client.connect()
  try {
    await client.query(sql)
  } finally {
    await client.end()
  }
}

async function freshDatabase(): Promise<void> {
  await admin(`DROP DATABASE IF EXISTS ${values.db} WITH (FORCE)`)
  await admin(`CREATE DATABASE ${values.db}`)
  await runOk(process.execPath, ['bin/openbook.js', 'migrate', '--json'], {
    env: { ...process.env, DATABASE_URL },
  })
}

async function tableCounts(): Promise<Record<string, number>> {
  const client = new pg.Client({ connectionString: DATABASE_URL })
  await client.connect()
  try {
    const { rows } = await client.query<Record<string, number>>(
      `SELECT (SELECT count(*)::int FROM organizations) AS organizations,
              (SELECT count(*)::int FROM customers) AS customers,
              (SELECT count(*)::int FROM appointments) AS appointments`,
    )
    return rows[0] ?? {}
  } finally {
    await client.end()
  }
}

interface ImportRun {
  /** What was measured: a first load into an empty database, or the same file again. */
  readonly kind: 'into an empty database' | 'the same file again'
  readonly lines: number
  readonly code: number
  readonly seconds: number
  readonly maxRssMb: number
  readonly nodeCpuSeconds: number
  readonly postgresCpuPercent: number
  readonly stderr: string
}

const TIME = '/usr/bin/time'

/** `openbook import FILE --json` (in a fresh database unless `again`), under /usr/bin/time for its peak RSS. */
async function timedImport(file: string, lines: number, again = false): Promise<ImportRun> {
  if (!again) await freshDatabase()
  const command = [process.execPath, 'bin/openbook.js', 'import', file, '--json']
  const useTime = existsSync(TIME)
  const monitor = new pg.Client({ connectionString: DATABASE_URL })
  await monitor.connect()
  const postgres = new Meter(backendPids(monitor, APPLICATION))
  await postgres.start()
  const started = performance.now()
  const result = await run(
    useTime ? TIME : (command[0] ?? ''),
    useTime ? ['-f', '%M %U %S', ...command] : command.slice(1),
    {
      env: { ...process.env, DATABASE_URL: `${DATABASE_URL}?application_name=${APPLICATION}` },
      timeoutMs: 20 * 60_000,
    },
  )
  const seconds = (performance.now() - started) / 1000
  const pgUse = await postgres.stop()
  await monitor.end()
  const [rssKb, user, system] = (result.stderr.trim().split('\n').pop() ?? '').split(' ').map(Number)
  return {
    kind: again ? 'the same file again' : 'into an empty database',
    lines,
    code: result.code,
    seconds,
    maxRssMb: useTime ? (rssKb ?? 0) / 1024 : Number.NaN,
    nodeCpuSeconds: useTime ? (user ?? 0) + (system ?? 0) : Number.NaN,
    postgresCpuPercent: pgUse.cpuPercent,
    stderr: result.stderr,
  }
}

/** A small valid file with one bad line last: the import must fail, name the line and leave nothing. */
async function allOrNothing(
  file: string,
): Promise<{ code: number; message: string; counts: Record<string, number> }> {
  const written = await writeNdjson(file, 2_000, 3)
  const bad = '{"type":"customer","id":"cus_bad","orgId":"org_3_0001","isActive":"yes"}\n'
  writeFileSync(file, bad, { flag: 'a' })
  await freshDatabase()
  const result = await run(process.execPath, ['bin/openbook.js', 'import', file], {
    env: { ...process.env, DATABASE_URL },
  })
  return {
    code: result.code,
    message: `${result.stderr.trim()} (bad line ${written.lines + 1})`,
    counts: await tableCounts(),
  }
}

const int = (value: number) => Math.round(value).toLocaleString('en-US')

function render(
  runs: readonly ImportRun[],
  sizes: Record<number, number>,
  check: Awaited<ReturnType<typeof allOrNothing>>,
): string {
  const rows = runs.map(
    (r) =>
      `| ${int(r.lines)} | ${r.kind} | ${int((sizes[r.lines] ?? 0) / 2 ** 20)} MB | ${r.code === 0 ? 'ok' : `exit ${r.code}`} | ${r.seconds.toFixed(1)} s | ` +
      `${int(r.lines / r.seconds)} | ${int(r.maxRssMb)} MB | ${r.nodeCpuSeconds.toFixed(1)} s | ${int(r.postgresCpuPercent)} % |`,
  )
  const empty = Object.values(check.counts).every((n) => n === 0)
  const [small, large] = runs
  const growth =
    small && large
      ? `Memory: peak RSS ${int(small.maxRssMb)} MB for ${int(small.lines)} lines and ${int(large.maxRssMb)} MB for ` +
        `${int(large.lines)} lines (${large.maxRssMb <= small.maxRssMb * 1.25 ? 'flat' : '**grows**'} with the file size).`
      : ''
  return [
    '## Import benchmark',
    '',
    `Command: \`npm run bench:import\`, ${new Date().toISOString().slice(0, 16).replace('T', ' ')} UTC. ` +
      '`openbook import FILE --json` into a freshly migrated PostgreSQL database (a first load), then the large file ' +
      'once more into the loaded database (every line an upsert of an unchanged row); realistic NDJSON (organizations ' +
      'with owner, staff and services, then customers and appointments, skewed sizes) from the seed generator. ' +
      'Peak RSS and Node CPU from `/usr/bin/time`; PostgreSQL CPU is its backend, as per cent of one core.',
    '',
    '| Lines | Import | File | Result | Time | Lines/s | Peak RSS (import process) | Node CPU | PostgreSQL CPU |',
    '|--:|---|--:|---|--:|--:|--:|--:|--:|',
    ...rows,
    '',
    growth,
    '',
    `All-or-nothing: a 2,000-line file with a bad last line → exit ${check.code}, ` +
      `\`${check.message.replace(/`/g, "'")}\`; rows left behind: ${JSON.stringify(check.counts)} ` +
      `(${check.code === 1 && empty ? 'nothing imported, as promised' : '**not** all-or-nothing'}).`,
  ].join('\n')
}

async function main(): Promise<void> {
  if (!values['no-build']) {
    log('building (npm run build)')
    await runOk('npm', ['run', 'build'], { timeoutMs: 300_000 })
  }
  const sizes: Record<number, number> = {}
  const runs: ImportRun[] = []
  for (const lines of [Math.round(LINES / 5), LINES]) {
    const file = join(workDir, `import-${lines}.ndjson`)
    const startedAt = performance.now()
    const written = await writeNdjson(file, lines, 11)
    sizes[lines] = written.bytes
    log(
      `wrote ${int(written.lines)} lines (${int(written.bytes / 2 ** 20)} MB) in ${((performance.now() - startedAt) / 1000).toFixed(1)} s: ${JSON.stringify(written.counts)}`,
    )
    // The large file a second time: every line an upsert of an unchanged row.
    for (const again of lines === LINES ? [false, true] : [false]) {
      const result = await timedImport(file, lines, again)
      if (result.code !== 0)
        throw new Error(`import failed: ${result.stderr.trim().split('\n').slice(-2).join(' | ')}`)
      log(
        `imported ${int(lines)} lines ${result.kind} in ${result.seconds.toFixed(1)} s (${int(lines / result.seconds)} lines/s), ` +
          `peak RSS ${int(result.maxRssMb)} MB, node CPU ${result.nodeCpuSeconds.toFixed(1)} s, postgres ${int(result.postgresCpuPercent)} %`,
      )
      runs.push(result)
    }
    rmSync(file, { force: true })
  }
  const check = await allOrNothing(join(workDir, 'bad.ndjson'))
  log(`all-or-nothing: exit ${check.code}, ${check.message}, left ${JSON.stringify(check.counts)}`)
  const section = render(runs, sizes, check)
  if (!values['no-write']) writeResultsSection('import', section)
  process.stdout.write(`${section}\n`)
}

try {
  await main()
} catch (error) {
  log(`failed: ${(error as Error).stack ?? error}`)
  process.exitCode = 1
} finally {
  killAll()
  rmSync(workDir, { recursive: true, force: true })
  await admin(`DROP DATABASE IF EXISTS ${values.db} WITH (FORCE)`).catch(() => {})
}
