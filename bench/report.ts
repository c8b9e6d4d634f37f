import { spawnSync } from 'node:child_process'
import { existsSync, readFileSync, writeFileSync } from 'node:fs'
import { cpus, totalmem } from 'node:os'
import type pg from 'pg'
import { type BenchReport, checks, int, type Machine, ms, ratio } from './checks.js'
import type { SeedInfo } from './data.js'
import type { EmbeddedMix } from './embedded.js'
import type { LoadResult } from './load.js'
import type { TargetResult } from './measure.js'

export async function machineInfo(client: pg.Client): Promise<Machine> {
  const { rows } = await client.query<{ version: string; shared_buffers: string }>(
    "SELECT split_part(version(), ' on ', 1) AS version, current_setting('shared_buffers') AS shared_buffers",
  )
  return {
    cpus: cpus().length,
    model: cpus()[0]?.model.trim() ?? 'unknown',
    memoryGiB: Math.round((totalmem() / 2 ** 30) * 10) / 10,
    node: process.version,
    postgres: rows[0]?.version ?? 'unknown',
    sharedBuffers: rows[0]?.shared_buffers ?? '?',
  }
}

const pct = (value: number | null) => (value === null ? '–' : `${Math.round(value)}`)
const latency = (result: LoadResult) => `${ms(result.p50)} / ${ms(result.p99)}`
const failures = (result: TargetResult) => result.saturation.failures + result.half.failures

function orgLine(report: BenchReport): string {
  return report.orgs
    .map(
      (o) =>
        `${o.size} \`${o.id}\` (${o.plan}, ${int(o.customers)} customers, ${int(o.appointments)} appointments)`,
    )
    .join('; ')
}

function seedLine(seed: SeedInfo): string {
  const rate = Number.isFinite(seed.rowsPerSecond)
    ? `seeded by \`openbook seed\` in ${seed.seconds} s, ${int(seed.rowsPerSecond)} rows/s ` +
      `(${seed.wallSeconds} s with process start)`
    : 'seed time not recorded'
  const reused = seed.fresh ? '' : ' (by an earlier run; this run reused the database)'
  return `${rate}${reused}; \`VACUUM (ANALYZE)\` ${seed.vacuumSeconds} s`
}

/** How much the rest of the machine competed: CPU of every other process during the saturation runs. */
function contention(report: BenchReport): string {
  const others = [
    ...report.mixes.flatMap((m) => [m.pgbench, m.baseline, m.openbook].map((t) => t.saturation.otherCpu)),
    ...report.embedded.mixes.map((m) => m.otherCpu),
  ]
  if (others.length === 0) return ''
  const mean = others.reduce((a, b) => a + b, 0) / others.length
  return (
    `Everything else on the machine used on average ${Math.round(mean)} % and at most ` +
    `${Math.round(Math.max(...others))} % of one core during the saturation runs (of ${report.machine.cpus * 100} %): ` +
    "other processes, and PostgreSQL's autovacuum and parallel workers, which live too briefly to be sampled."
  )
}

function setup(report: BenchReport): string[] {
  const { machine, options, load } = report
  return [
    `Command: \`${report.command}\`, finished ${report.finishedAt.slice(0, 16).replace('T', ' ')} UTC, ` +
      `${Math.floor(report.totalSeconds / 60)} min ${report.totalSeconds % 60} s in all ` +
      `(${report.seed.fresh ? 'build and seeding included' : 'build included; the seeded database was reused'}).`,
    '',
    `Machine: ${machine.cpus} × ${machine.model}, ${machine.memoryGiB} GiB, Node ${machine.node}, ${machine.postgres} ` +
      `(shared_buffers ${machine.sharedBuffers}). Load generator, servers and PostgreSQL share the ${machine.cpus} ` +
      `cores and talk over loopback. ${contention(report)}`,
    '',
    `Data: ${int(options.orgs)} organizations, ${int(options.customers)} customers, ${int(options.appointments)} ` +
      `appointments (seed ${options.seed}); ${seedLine(report.seed)}. Keys made with \`openbook keys create\` for: ` +
      `${orgLine(report)}.`,
    '',
    `Load: saturation with autocannon (separate process, ${load.connections} connections, pipelining 1, ` +
      `${load.duration} s after ${load.warmup} s of warm-up); latency at half of each target's own saturation rate, ` +
      "open loop with evenly spaced requests (autocannon's own rate limit sends bursts), from the start of each " +
      'request, wait for a free connection included, for at least 12 requests; the database is let go idle ' +
      `between measurements. pgbench: ${load.poolSize} clients, simple protocol, a script of the very transaction ` +
      'openbook sends (`BEGIN; SET TRANSACTION READ ONLY; SET LOCAL ROLE openbook_reader; SET LOCAL ' +
      'statement_timeout`, key lookup, page with total, `COMMIT`), SQL captured from src/queries; its latency ' +
      `comes from its log at \`--rate\`. Both servers use a pool of ${load.poolSize} connections. CPU: per cent of ` +
      'one core during saturation (Node: the server process; PostgreSQL: the backends serving that target).',
    '',
    `Latency floor of the machine and load generator: a bare node:http server sending a fixed 25 KB body, ` +
      `loaded the same way at ${report.floor.rate} req/s, answers in p50 ${ms(report.floor.p50)} / p99 ` +
      `${ms(report.floor.p99)} ms.`,
  ]
}

function mixTable(report: BenchReport): string[] {
  const rows = report.mixes.map((mix) => {
    const bad = failures(mix.pgbench) + failures(mix.baseline) + failures(mix.openbook)
    const pgCpu = [mix.pgbench, mix.baseline, mix.openbook]
      .map((t) => pct(t.saturation.postgresCpu))
      .join(' · ')
    return (
      `| ${mix.id} | ${mix.label}${bad ? ` ⚠ ${bad} failed` : ''} | ${int(mix.pgbench.saturation.rps)} | ` +
      `${int(mix.baseline.saturation.rps)} | ${int(mix.openbook.saturation.rps)} | ${ratio(mix).toFixed(2)} | ` +
      `${latency(mix.pgbench.half)} | ${latency(mix.baseline.half)} | ${latency(mix.openbook.half)} | ` +
      `${pct(mix.baseline.saturation.serverCpu)} · ${pct(mix.openbook.saturation.serverCpu)} | ${pgCpu} |`
    )
  })
  return [
    '| Mix | Request | pgbench tx/s | minimal req/s | openbook req/s | openbook ÷ minimal | p50 / p99 ms pgbench | ' +
      'p50 / p99 ms minimal | p50 / p99 ms openbook | CPU % Node minimal · openbook | CPU % PostgreSQL pgbench · minimal · openbook |',
    '|---|---|--:|--:|--:|--:|--:|--:|--:|--:|--:|',
    ...rows,
  ]
}

function embeddedTable(report: BenchReport): string[] {
  const row = (mix: EmbeddedMix) =>
    `| ${mix.id} | ${mix.label} | ${int(mix.result.rps)} | ${latency(mix.result)} | ${pct(mix.serverCpu)} | ` +
    `${mix.loopDelay.p50} / ${mix.loopDelay.p99} / ${mix.loopDelay.max} |`
  return [
    `Embedded store (PGlite in a fresh DATA_DIR, the demo organization: 300 customers, 600 appointments; ` +
      `${report.load.connections} connections, saturation; event-loop delay from a preloaded ` +
      `\`monitorEventLoopDelay\`; peak RSS ${int(report.embedded.rssMb)} MB):`,
    '',
    '| Mix | Request | req/s | p50 / p99 ms | CPU % Node | event-loop delay p50 / p99 / max ms |',
    '|---|---|--:|--:|--:|--:|',
    ...report.embedded.mixes.map(row),
  ]
}

/** The section between the bench markers: set-up, tables, targets, plans, requests. */
export function renderBench(report: BenchReport, withPlans: boolean): string {
  const out = [...setup(report), '', ...mixTable(report), '']
  out.push(
    'Ratios move by about ±0.2 from one run to the next on this shared machine (bench/RESULTS.md, ' +
      'Findings): compare them within a run, and a mix over several runs.',
    '',
  )
  out.push(
    `Peak RSS (VmHWM): openbook ${int(report.rss.openbookMb)} MB, minimal handler ${int(report.rss.baselineMb)} MB.`,
  )
  out.push('', ...embeddedTable(report), '', '| Target | Met | Figures |', '|---|---|---|')
  for (const check of checks(report))
    out.push(`| ${check.target} | ${check.met ? 'yes' : '**no**'} | ${check.figures} |`)
  out.push('')
  for (const plan of report.explain) {
    out.push(
      `Count of the largest organization's active ${plan.label} (EXPLAIN (ANALYZE, BUFFERS) as openbook_reader ` +
        `after VACUUM): ${plan.scans.join('; ')}; ${plan.readsTable ? '**reads the table**' : 'no table rows read'}, ` +
        `Heap Fetches: ${plan.heapFetches ?? '–'}, ${ms(plan.ms)} ms.`,
    )
    if (withPlans) out.push('', '```', plan.text, '```')
    out.push('')
  }
  out.push("Requests (with the organization's key in `Authorization: Bearer …`):", '')
  for (const mix of report.mixes) out.push(`- ${mix.id}: \`GET ${mix.path}\``)
  return out.join('\n')
}

/** Replaces the text between two marker lines (kept), or appends the markers and the text. */
export function replaceBetween(text: string, start: string, end: string, content: string): string {
  const from = text.indexOf(start)
  const to = text.indexOf(end)
  const block = `${start}\n${content.trim()}\n${end}`
  if (from < 0 || to < from) return `${text.trimEnd()}\n\n${block}\n`
  return text.slice(0, from) + block + text.slice(to + end.length)
}

const RESULTS_FILE = 'bench/RESULTS.md'
const RESULTS_HEADER = `# Benchmark results

Written by \`npm run bench\` (between the bench markers) and \`npm run bench:import\` (between the
import markers); the rest of this file is kept as it is.
`

/** Markdown as the repository's formatter (Biome) writes it, so that `npm run lint` accepts it. */
function formatMarkdown(text: string): string {
  const biome = spawnSync('node_modules/.bin/biome', ['format', '--stdin-file-path=bench/RESULTS.md'], {
    input: text,
    encoding: 'utf8',
  })
  return biome.status === 0 && biome.stdout ? biome.stdout : text
}

/** Updates one marked section of bench/RESULTS.md, creating the file when needed. */
export function writeResultsSection(name: 'bench' | 'import', content: string): void {
  const text = existsSync(RESULTS_FILE) ? readFileSync(RESULTS_FILE, 'utf8') : RESULTS_HEADER
  const updated = replaceBetween(text, `<!-- ${name}:start -->`, `<!-- ${name}:end -->`, content)
  writeFileSync(RESULTS_FILE, formatMarkdown(updated))
}

export function writeReport(report: BenchReport): void {
  writeResultsSection('bench', `## Service benchmark\n\n${renderBench(report, true)}`)
  const readme = readFileSync('README.md', 'utf8')
  if (!readme.includes('<!-- bench:start -->') || !readme.includes('<!-- bench:end -->')) {
    throw new Error('README.md has no bench markers')
  }
  const section = `${renderBench(report, false)}\n\nDetails, plans and the import benchmark: [bench/RESULTS.md](bench/RESULTS.md).`
  // Only the section is formatted: the rest of the README is not this script's to change.
  const formatted = formatMarkdown(section)
  writeFileSync('README.md', replaceBetween(readme, '<!-- bench:start -->', '<!-- bench:end -->', formatted))
}
