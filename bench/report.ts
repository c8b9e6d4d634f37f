import { spawnSync } from 'node:child_process'
import { existsSync, readFileSync, writeFileSync } from 'node:fs'
import { cpus, totalmem } from 'node:os'
import type pg from 'pg'
import { ACCEPT_ENCODING } from '../packages/client/src/transport.js'
import {
  type BenchReport,
  type Check,
  checks,
  cpuMicros,
  cpuSpeedup,
  earlierChecks,
  int,
  type Machine,
  microsPerRequest,
  ms,
  nodeOverPostgres,
  ofCeiling,
  pgMicros,
  ratio,
  type ScaleReport,
  sideBySideRatio,
  speedup,
  verdict,
} from './checks.js'
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
const micros = (value: number | null) => (value === null ? '–' : int(value))
const latency = (result: LoadResult | undefined) => (result ? `${ms(result.p50)} / ${ms(result.p99)}` : '–')
const failures = (result: TargetResult | undefined) =>
  result ? result.saturation.failures + result.half.failures : 0
const loads = (values: readonly number[]) => values.map((v) => v.toFixed(2)).join(' ')

function orgLine(scale: ScaleReport): string {
  return scale.orgs
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
    ...report.scales.flatMap((s) =>
      s.mixes.flatMap((m) =>
        [m.pgbench, m.baseline, m.openbook, m.previous].flatMap((t) => (t ? [t.saturation.otherCpu] : [])),
      ),
    ),
    ...report.embedded.mixes.map((m) => m.otherCpu),
  ]
  if (others.length === 0) return ''
  const mean = others.reduce((a, b) => a + b, 0) / others.length
  return (
    `Everything else on the machine used on average ${Math.round(mean)} % and at most ` +
    `${Math.round(Math.max(...others))} % of one core during the saturation runs (of ${report.machine.cpus * 100} %): ` +
    "other processes (other engineers' test runs on this shared machine), and PostgreSQL's autovacuum and " +
    'parallel workers, which live too briefly to be sampled.'
  )
}

function previousName(report: BenchReport): string {
  return report.previous?.commit ?? 'previous'
}

function setup(report: BenchReport): string[] {
  const { machine, load } = report
  const previous = report.previous
    ? ` The older build \`${report.previous.commit}\` (a git worktree at \`${report.previous.dir}\`, built with ` +
      '`npm ci && npm run build`) runs the same mixes on the same databases (its schema is the same: the ' +
      'numbered migrations did not change since), one target after the other in the same run.'
    : ''
  return [
    `Command: \`${report.command}\`, finished ${report.finishedAt.slice(0, 16).replace('T', ' ')} UTC, ` +
      `${Math.floor(report.totalSeconds / 60)} min ${report.totalSeconds % 60} s in all. openbook measured: ` +
      `\`${report.openbookCommit}\`.${previous}`,
    '',
    `Machine: ${machine.cpus} × ${machine.model}, ${machine.memoryGiB} GiB, Node ${machine.node}, ${machine.postgres} ` +
      `(shared_buffers ${machine.sharedBuffers}). Load generator, servers and PostgreSQL share the ${machine.cpus} ` +
      `cores and talk over loopback. ${contention(report)} Load averages (1, 5, 15 min) at the start and end ` +
      `of each scale: ${report.scales.map((s) => `${s.scale.name} ${loads(s.loadAverage.start)} → ${loads(s.loadAverage.end)}`).join('; ')}.`,
    '',
    `Load: saturation with autocannon (${load.connections} connections, pipelining 1) in ` +
      `${saturationRounds(load)}; latency at half of each target's own (median) saturation rate, ` +
      'open loop with evenly spaced requests, from the start of each request, wait for a free connection ' +
      'included, for at least 12 requests; the database is let go idle between measurements. pgbench, the ' +
      `database's own ceiling: ${load.poolSize} clients, \`-M prepared\`, the key lookup and the page as openbook ` +
      'runs them (SQL captured from src/queries, the same parameters), as openbook_reader with the settings of ' +
      "openbook's transactions made per session (bench/ladder.ts), metered from its second second on. The minimal " +
      'handler (bench/baseline-server.ts: node:http and pg, no framework) runs the same ' +
      "SQL as openbook sends it (its settings, the key lookup and the page's EXECUTE in one message that is its own " +
      'transaction, the messages of requests that come in the same turn pipelined on one connection, up to 4) ' +
      'with the same prepared statements. Every server uses a pool of ' +
      `${load.poolSize} connections. CPU per request: CPU time of the process (Node) or of the backends serving ` +
      'that target (PostgreSQL) during saturation, divided by the requests answered. "By CPU": the other ' +
      "target's Node + PostgreSQL CPU per request over openbook's, the req/s ratio that a machine running " +
      'nothing else would show where CPU is the limit; on a machine shared with other work it is steadier ' +
      'than the req/s ratio, which depends on what the others take in each few seconds.',
    '',
    `Latency floor of the machine and load generator: a bare node:http server sending a fixed 25 KB body, ` +
      `loaded the same way at ${report.floor.rate} req/s, answers in p50 ${ms(report.floor.p50)} / p99 ` +
      `${ms(report.floor.p99)} ms.` +
      (report.floor.saturation
        ? ` At saturation it answers ${int(report.floor.saturation.rps)} req/s for ` +
          `${micros(report.floor.saturation.nodeMicros)} µs of its CPU a request: the HTTP exchange's own part ` +
          "of a server's Node CPU a request."
        : ''),
  ]
}

/** How the saturation was measured; a report written before rounds had one round per server. */
function saturationRounds(load: BenchReport['load']): string {
  const rounds = load.rounds ?? 1
  if (rounds === 1) return `${load.duration} s after ${load.warmup} s of warm-up`
  return (
    `${rounds} rounds of ${load.duration} s per server on each mix, the servers taking turns (the first ` +
    `round after ${load.warmup} s of warm-up); req/s is the mean of a server's rounds, and a ratio of two ` +
    "servers' req/s the median of their ratios within each round; the latency rounds likewise, each " +
    "p50 and p99 the median of the server's rounds"
  )
}

function mixTable(report: BenchReport, scale: ScaleReport): string[] {
  const prev = previousName(report)
  const rows = scale.mixes.map((mix) => {
    const bad =
      failures(mix.pgbench) + failures(mix.baseline) + failures(mix.openbook) + failures(mix.previous)
    const targets = [mix.baseline, mix.openbook, mix.previous]
    const pg = [mix.pgbench, ...targets].map((t) => micros(pgMicros(t))).join(' · ')
    const node = targets
      .map((t) => micros(t ? microsPerRequest(t.saturation.serverCpu, t.saturation.rps) : null))
      .join(' · ')
    const up = speedup(mix)
    const cpu = targets.map((t) => micros(cpuMicros(t))).join(' · ')
    return (
      `| ${mix.id} | ${mix.label}${bad ? ` ⚠ ${bad} failed` : ''}${mix.previousDisagrees ? ` ⚠ ${prev} answers differently` : ''} | ` +
      `${mix.pgbench ? int(mix.pgbench.saturation.rps) : '–'} | ${int(mix.baseline.saturation.rps)} | ` +
      `${int(mix.openbook.saturation.rps)} | ${mix.previous ? int(mix.previous.saturation.rps) : '–'} | ` +
      `${ratio(mix).toFixed(2)} | ${sideBySideRatio(mix)?.toFixed(2) ?? '–'} | ${up === undefined ? '–' : up.toFixed(2)} | ` +
      `${latency(mix.baseline.half)} | ${latency(mix.openbook.half)} | ${latency(mix.previous?.half)} | ${pg} | ${node} | ` +
      `${cpu} | ${cpuSpeedup(mix, 'baseline')?.toFixed(2) ?? '–'} | ${cpuSpeedup(mix, 'previous')?.toFixed(2) ?? '–'} |`
    )
  })
  return [
    `| Mix | Request | pgbench tx/s | minimal req/s | openbook req/s | ${prev} req/s | openbook ÷ minimal | ` +
      'openbook ÷ minimal, side by side | ' +
      `openbook ÷ ${prev} | p50 / p99 ms minimal | p50 / p99 ms openbook | p50 / p99 ms ${prev} | ` +
      `PostgreSQL µs/req pgbench · minimal · openbook · ${prev} | Node µs/req minimal · openbook · ${prev} | ` +
      `CPU µs/req (both) minimal · openbook · ${prev} | openbook ÷ minimal by CPU | openbook ÷ ${prev} by CPU |`,
    '|---|---|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|',
    ...rows,
  ]
}

/** openbook beside pgbench on the same statements, with identity and with the client's encoding. */
function ceilingTable(scale: ScaleReport): string[] {
  const ratioText = (value: number | undefined) => (value === undefined ? '–' : value.toFixed(2))
  const rows = scale.mixes.map((mix) => {
    const encoded = mix.clientEncoding
    const node = (rps: number, cpu: number | null) => micros(microsPerRequest(cpu, rps))
    return (
      `| ${mix.id} | ${mix.pgbench ? int(mix.pgbench.saturation.rps) : '–'} | ${int(mix.openbook.saturation.rps)} | ` +
      `${ratioText(ofCeiling(mix, 'identity'))} | ${encoded ? int(encoded.rps) : '–'} | ${ratioText(ofCeiling(mix, 'client'))} | ` +
      `${node(mix.openbook.saturation.rps, mix.openbook.saturation.serverCpu)} · ${encoded ? node(encoded.rps, encoded.serverCpu) : '–'} | ` +
      `${micros(pgMicros(mix.openbook))} | ${ratioText(nodeOverPostgres(mix))} |`
    )
  })
  return [
    `openbook beside the database's ceiling (pgbench on the same statements, above), identity and with the shipped client's \`Accept-Encoding: ${ACCEPT_ENCODING}\`:`,
    '',
    '| Mix | pgbench tx/s | openbook req/s | ÷ pgbench | openbook req/s, client encoding | ÷ pgbench | Node µs/req identity · client encoding | PostgreSQL µs/req | Node ÷ PostgreSQL |',
    '|---|--:|--:|--:|--:|--:|--:|--:|--:|',
    ...rows,
  ]
}

function embeddedTable(report: BenchReport): string[] {
  const row = (mix: EmbeddedMix) =>
    `| ${mix.id} | ${mix.label} | ${int(mix.result.rps)} | ${latency(mix.result)} | ${pct(mix.serverCpu)} | ` +
    `${mix.loopDelay.p50} / ${mix.loopDelay.p99} / ${mix.loopDelay.max} | ` +
    `${mix.half ? `${int(mix.half.rps)}: ${latency(mix.half)}` : '–'} |`
  return [
    `Embedded store (openbook \`${report.openbookCommit}\` on PGlite in a fresh DATA_DIR, the demo organization: ` +
      `300 customers, 600 appointments; ${report.load.connections} connections, saturation; event-loop delay ` +
      `from a preloaded \`monitorEventLoopDelay\`; peak RSS (VmHWM) of the server process ` +
      `${int(report.embedded.rssMb)} MB):`,
    '',
    '| Mix | Request | req/s | p50 / p99 ms | CPU % Node | event-loop delay p50 / p99 / max ms | half load req/s: p50 / p99 ms |',
    '|---|---|--:|--:|--:|--:|--:|',
    ...report.embedded.mixes.map(row),
  ]
}

function checkTable(rows: readonly Check[]): string[] {
  return [
    '| Target | Met | Figures |',
    '|---|---|---|',
    ...rows.map((check) => `| ${check.target} | ${verdict(check)} | ${check.figures} |`),
  ]
}

function scaleSection(report: BenchReport, scale: ScaleReport): string[] {
  const { name, orgs, customers, appointments, seed } = scale.scale
  const out = [
    `### Scale ${name}: ${int(orgs)} organizations, ${int(customers)} customers, ${int(appointments)} appointments`,
    '',
    `Data: \`openbook seed --orgs ${orgs} --customers ${customers} --appointments ${appointments} --seed ${seed}\` ` +
      `in database \`${scale.scale.database}\`; ${seedLine(scale.seed)}. Keys made with \`openbook keys create\` ` +
      `for: ${orgLine(scale)}.`,
    '',
    ...mixTable(report, scale),
    '',
    ...(scale.mixes.some((mix) => mix.clientEncoding) ? [...ceilingTable(scale), ''] : []),
    `Peak RSS (VmHWM): openbook ${int(scale.rss.openbookMb)} MB, minimal handler ${int(scale.rss.baselineMb)} MB` +
      `${scale.rss.previousMb === undefined ? '' : `, ${previousName(report)} ${int(scale.rss.previousMb)} MB`}.`,
    '',
  ]
  for (const plan of scale.explain) {
    out.push(
      `Count of the largest organization's active ${plan.label} (EXPLAIN (ANALYZE, BUFFERS) as openbook_reader ` +
        `after VACUUM): ${plan.scans.join('; ')}; ${plan.readsTable ? '**reads the table**' : 'no table rows read'}, ` +
        `Heap Fetches: ${plan.heapFetches ?? '–'}, ${ms(plan.ms)} ms.`,
      '',
    )
  }
  out.push("Requests (with the organization's key in `Authorization: Bearer …`):", '')
  for (const mix of scale.mixes) out.push(`- ${mix.id}: \`GET ${mix.path}\``)
  out.push('')
  return out
}

/** The section between the bench markers: set-up, targets, a table per scale, the embedded store. */
export function renderBench(report: BenchReport): string {
  const out = [...setup(report), '', '### Targets', '', ...checkTable(checks(report)), '']
  out.push(
    'Ratios move by about ±0.2 from one run to the next on this shared machine: compare them within a run, ' +
      'and a mix over several runs.',
    '',
    '### Earlier targets',
    '',
    ...checkTable(earlierChecks(report)),
    '',
  )
  for (const scale of report.scales) out.push(...scaleSection(report, scale))
  out.push('### Embedded store', '', ...embeddedTable(report))
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
export function writeResultsSection(
  name:
    | 'bench'
    | 'import'
    | 'import-against'
    | 'first-start'
    | 'embedded-shapes'
    | 'postgres-shapes'
    | 'writer'
    | 'writer-isolation'
    | 'soak'
    | `embedded-scale-${number}`,
  content: string,
): void {
  const text = existsSync(RESULTS_FILE) ? readFileSync(RESULTS_FILE, 'utf8') : RESULTS_HEADER
  const updated = replaceBetween(text, `<!-- ${name}:start -->`, `<!-- ${name}:end -->`, content)
  writeFileSync(RESULTS_FILE, formatMarkdown(updated))
}

export function writeReport(report: BenchReport): void {
  writeResultsSection('bench', `## Service benchmark\n\n${renderBench(report)}`)
}
