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
  '| Mix | pgbench `-M prepared` µs/tx | openbook PostgreSQL µs/req | ÷ ceiling | previous build µs/req | ÷ ceiling | pgbench tx/s | openbook req/s | ÷ pgbench | previous req/s |',
  '|---|--:|--:|--:|--:|--:|--:|--:|--:|--:|',
)
for (const mix of report) {
  const ceiling = of(mix, 'pgb-prepared')
  const ours = of(mix, 'openbook')
  const main = mix.summary.find((s) => s.target === 'previous')
  out.push(
    `| ${name(mix)} | ${int(ceiling.pgMicros)} | ${int(ours.pgMicros)} | ${x(ours.pgMicros / ceiling.pgMicros)} | ` +
      `${main ? int(main.pgMicros) : '–'} | ${main ? x(main.pgMicros / ceiling.pgMicros) : '–'} | ${int(ceiling.rps)} | ` +
      `${int(ours.rps)} | ${x(ours.rps / ceiling.rps)} | ${main ? int(main.rps) : '–'} |`,
  )
}
out.push('')

const ladder = report[0]?.summary.filter((s) => s.target.startsWith('pgb-')).map((s) => s.target) ?? []
out.push(`| pgbench script | ${report.map(name).join(' | ')} |`, `|---|${report.map(() => '--:').join('|')}|`)
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
out.push('')

const techniques = ['no-one-trip', 'no-sql-prepare', 'pooler', 'no-text-timestamps']
out.push(
  '| Technique switched off | Mix | req/s on → off | share (req/s on ÷ off − 1) | CPU µs/req (Node + PostgreSQL) on → off | share (CPU off ÷ on − 1) |',
  '|---|---|--:|--:|--:|--:|',
)
for (const technique of techniques) {
  for (const mix of report) {
    const on = of(mix, 'openbook')
    const off = mix.summary.find((s) => s.target === technique)
    if (!off) continue
    out.push(
      `| ${technique} | ${name(mix)} | ${int(on.rps)} → ${int(off.rps)} | ${pct(on.rps / off.rps - 1)} | ` +
        `${int(cpu(on))} → ${int(cpu(off))} | ${pct(cpu(off) / cpu(on) - 1)} |`,
    )
  }
}
process.stdout.write(`${out.join('\n')}\n`)
