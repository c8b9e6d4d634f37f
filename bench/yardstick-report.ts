/**
 * node --import tsx bench/yardstick-report.ts [bench/results/yardstick.json]
 *
 * The yardstick's figures (bench/yardstick.ts) as markdown tables: openbook against the ceiling,
 * where openbook's PostgreSQL CPU goes (the pgbench ladder), and each technique's own share.
 */
import { readFileSync } from 'node:fs'

interface Summary {
  readonly target: string
  readonly rps: number
  readonly pgMicros: number
  readonly nodeMicros: number | null
}

interface MixReport {
  readonly scale: string
  readonly mix: string
  readonly loadStart: readonly number[]
  readonly loadEnd: readonly number[]
  readonly summary: readonly Summary[]
  /** Every round of every target, in the order they ran. */
  readonly rounds: readonly Summary[]
}

const file = process.argv[2] ?? 'bench/results/yardstick.json'
const { command, report } = JSON.parse(readFileSync(file, 'utf8')) as {
  command: string[]
  report: MixReport[]
}

const int = (value: number) => Math.round(value).toLocaleString('en-US')
const x = (value: number) => `${value.toFixed(2)}×`
const pct = (value: number) => `${value >= 0 ? '+' : '−'}${Math.abs(value * 100).toFixed(1)} %`
const of = (mix: MixReport, target: string) => {
  const found = mix.summary.find((s) => s.target === target)
  if (!found) throw new Error(`${mix.scale} ${mix.mix}: no ${target}`)
  return found
}
const cpu = (s: Summary) => s.pgMicros + (s.nodeMicros ?? 0)
const name = (mix: MixReport) => `${mix.scale} ${mix.mix}`

const out: string[] = [`Command: \`npm run bench:yardstick -w @openbook/bench -- ${command.join(' ')}\``, '']
out.push(
  'Load averages (1, 5, 15 min) at the start and end of each mix: ' +
    report
      .map(
        (m) =>
          `${name(m)} ${m.loadStart.map((v) => v.toFixed(2)).join(' ')} → ${m.loadEnd.map((v) => v.toFixed(2)).join(' ')}`,
      )
      .join('; ') +
    '.',
  '',
)

out.push(
  "| Mix | pgbench `-M prepared` µs/tx | openbook PostgreSQL µs/req | ÷ ceiling | ceiling paced at openbook's req/s µs/tx | ÷ paced ceiling | openbook's message paced µs/tx | ÷ paced ceiling | openbook ÷ its message paced | previous build µs/req | ÷ ceiling | pgbench tx/s | openbook req/s | ÷ pgbench | previous req/s |",
  '|---|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|',
)
for (const mix of report) {
  const ceiling = of(mix, 'pgb-prepared')
  const ours = of(mix, 'openbook')
  const main = mix.summary.find((s) => s.target === 'previous')
  // Runs before the paced scripts had none.
  const paced = mix.summary.find((s) => s.target === 'pgb-prepared-paced')
  const message = mix.summary.find((s) => s.target === 'pgb-executes-implicit-paced')
  out.push(
    `| ${name(mix)} | ${int(ceiling.pgMicros)} | ${int(ours.pgMicros)} | ${x(ours.pgMicros / ceiling.pgMicros)} | ` +
      `${paced ? `${int(paced.pgMicros)} (at ${int(paced.rps)}/s)` : '–'} | ${paced ? x(ours.pgMicros / paced.pgMicros) : '–'} | ` +
      `${message ? `${int(message.pgMicros)} (at ${int(message.rps)}/s)` : '–'} | ${message && paced ? x(message.pgMicros / paced.pgMicros) : '–'} | ` +
      `${message ? x(ours.pgMicros / message.pgMicros) : '–'} | ` +
      `${main ? int(main.pgMicros) : '–'} | ${main ? x(main.pgMicros / ceiling.pgMicros) : '–'} | ${int(ceiling.rps)} | ` +
      `${int(ours.rps)} | ${x(ours.rps / ceiling.rps)} | ${main ? int(main.rps) : '–'} |`,
  )
}
out.push('')

// Run with --no-ladder: the ceiling alone, no ladder to show.
const hasLadder = report.every((mix) => mix.summary.some((s) => s.target === 'pgb-openbook'))
const ladder = hasLadder
  ? (report[0]?.summary
      .filter((s) => s.target.startsWith('pgb-') && !s.target.endsWith('-paced'))
      .map((s) => s.target) ?? [])
  : []
if (hasLadder)
  out.push(
    `| pgbench script | ${report.map(name).join(' | ')} |`,
    `|---|${report.map(() => '--:').join('|')}|`,
  )
for (const target of ladder) {
  out.push(
    `| ${target} | ${report
      .map((mix) => {
        const s = of(mix, target)
        const diff = s.pgMicros - of(mix, 'pgb-openbook').pgMicros
        return `${int(s.pgMicros)} (${diff >= 0 ? '+' : '−'}${int(Math.abs(diff))})`
      })
      .join(' | ')} |`,
  )
}
if (hasLadder) out.push('')

// The A/A control first: the same build in a second server, its "share" is the run's noise.
const techniques = [
  'openbook-again',
  'no-one-trip',
  'no-sql-prepare',
  'pooler',
  'no-text-timestamps',
  'no-row-bytes',
]
/** Per round, `value` of `target` over that of `base` in the same round: sorted. */
const pairedRatios = (mix: MixReport, target: string, base: string, value: (s: Summary) => number = cpu) => {
  const bases = mix.rounds.filter((r) => r.target === base)
  return mix.rounds
    .filter((r) => r.target === target)
    .map((r, i) => {
      const on = bases[i]
      return on ? value(r) / value(on) : Number.NaN
    })
    .filter((v) => Number.isFinite(v))
    .sort((a, b) => a - b)
}
/** Per round, the CPU a request of `target` over openbook's in the same round, less 1: sorted. */
const pairedShares = (mix: MixReport, target: string) =>
  pairedRatios(mix, target, 'openbook').map((ratio) => ratio - 1)
const middle = (sorted: readonly number[]) =>
  sorted.length === 0
    ? Number.NaN
    : sorted.length % 2
      ? (sorted[(sorted.length - 1) / 2] ?? Number.NaN)
      : ((sorted[sorted.length / 2 - 1] ?? 0) + (sorted[sorted.length / 2] ?? 0)) / 2

// `--paced-ladder`: the parts of openbook's message, each at openbook's rate.
const pacedLadder = (report[0]?.summary ?? [])
  .map((s) => s.target)
  .filter((target) => target.endsWith('-paced'))
if (pacedLadder.length > 2) {
  out.push(
    `| pgbench script at openbook's rate: PostgreSQL µs/tx (− openbook's message's) | ${report.map(name).join(' | ')} |`,
    `|---|${report.map(() => '--:').join('|')}|`,
  )
  for (const target of pacedLadder) {
    const cells = report.map((mix) => {
      const s = of(mix, target)
      const diff = s.pgMicros - of(mix, 'pgb-executes-implicit-paced').pgMicros
      return `${int(s.pgMicros)} (${diff >= 0 ? '+' : '−'}${int(Math.abs(diff))})`
    })
    out.push(`| ${target} | ${cells.join(' | ')} |`)
  }
  out.push('')
}

// At the same rate, round by round: what drifts over a run's minutes falls on both sides of a ratio.
const PACED_PAIRS = [
  ['openbook', 'pgb-prepared-paced'],
  ['openbook-again', 'pgb-prepared-paced'],
  ['pgb-executes-implicit-paced', 'pgb-prepared-paced'],
  ['openbook', 'pgb-executes-implicit-paced'],
] as const
if (report.every((mix) => mix.summary.some((s) => s.target === 'pgb-prepared-paced'))) {
  out.push(
    `| PostgreSQL µs/req, within each round: median (lowest … highest) | ${report.map(name).join(' | ')} |`,
    `|---|${report.map(() => '--:').join('|')}|`,
  )
  for (const [target, base] of PACED_PAIRS) {
    const cells = report.map((mix) => {
      const ratios = pairedRatios(mix, target, base, (s) => s.pgMicros)
      return `${x(middle(ratios))} (${x(ratios[0] ?? Number.NaN)} … ${x(ratios.at(-1) ?? Number.NaN)})`
    })
    out.push(`| ${target} ÷ ${base} | ${cells.join(' | ')} |`)
  }
  out.push('')
}

out.push(
  '| Technique switched off | Mix | req/s on → off | share (req/s on ÷ off − 1) | CPU µs/req (Node + PostgreSQL) on → off | share (CPU off ÷ on − 1) | the same within each round: median (lowest … highest) |',
  '|---|---|--:|--:|--:|--:|--:|',
)
for (const technique of techniques) {
  for (const mix of report) {
    const on = of(mix, 'openbook')
    const off = mix.summary.find((s) => s.target === technique)
    if (!off) continue
    const paired = pairedShares(mix, technique)
    out.push(
      `| ${technique === 'openbook-again' ? 'none (A/A control: openbook again)' : technique} | ${name(mix)} | ` +
        `${int(on.rps)} → ${int(off.rps)} | ${pct(on.rps / off.rps - 1)} | ` +
        `${int(cpu(on))} → ${int(cpu(off))} | ${pct(cpu(off) / cpu(on) - 1)} | ` +
        `${pct(middle(paired))} (${pct(paired[0] ?? Number.NaN)} … ${pct(paired.at(-1) ?? Number.NaN)}) |`,
    )
  }
}
process.stdout.write(`${out.join('\n')}\n`)
