/**
 * openbook on PostgreSQL at each data shape, without the rest of
 * `npm run bench`: for each shape, the 100k scale's database with the crowd
 * (`--shape-size`, default 300,000 customers and 600,000 appointments) as its largest organization
 * (`<database>_<shape>`, made or reused as `npm run bench -- --shape …` makes it), and every page of
 * the crowd (the `large` mixes: first, middle and last of customers and of appointments with each
 * filter) through openbook, at saturation and then at half that rate, evenly paced. Target: p50 at
 * half load ≤ 5 ms on every page. `spread` is the control: the full scale's largest organization,
 * of about the crowd's size, as `openbook seed` spreads it.
 *
 *   npm run build && npm run bench:shapes -- [--shapes spread,instant,ninety,sparse] [--duration 3]
 *     [--connections 16] [--shape-size 300000,600000] [--only cus-l,apt-l] [--write]
 *
 * `--write` puts the table into bench/RESULTS.md between the postgres-shapes markers.
 */
import { cpus } from 'node:os'
import { parseArgs } from 'node:util'
import { type DataSet, databaseUrl } from './data.js'
import { halfLoad, type LoadSettings, saturate, warmServer } from './measure.js'
import { assertLoopbackUrl, parseCrowd, SCALES, SHAPE_OPTIONS, shapeLoadSettings } from './options.js'
import { runFromRoot } from './paths.js'
import { prepareMixes } from './prepared-mixes.js'
import { killAll, loadAverageText } from './proc.js'
import { writeResultsSection } from './report.js'
import { startOpenbook } from './servers.js'

runFromRoot()

const { values } = parseArgs({
  options: {
    ...SHAPE_OPTIONS,
    only: { type: 'string', default: 'cus-l,apt-l' },
    pg: { type: 'string', default: process.env.BENCH_PG_URL ?? 'postgres://root@127.0.0.1:5432' },
  },
})
assertLoopbackUrl(values.pg)
const settings: LoadSettings = shapeLoadSettings(values, 10)
const log = (line: string) => process.stderr.write(`[${new Date().toISOString().slice(11, 19)}] ${line}\n`)
/** The shapes' target on PostgreSQL: p50 at half load, ms. */
const TARGET_P50_MS = 5

const loadBefore = loadAverageText()
const rows: string[] = []
let missed = 0
for (const shape of values.shapes.split(',')) {
  // `spread`, the control: the full scale's largest organization (298,132 customers and 595,929
  // appointments, spread by `openbook seed`), the crowd's size without its shape.
  const crowd = parseCrowd(shape, values['shape-size'])
  const scale = crowd ? SCALES['100k'] : SCALES.full
  const data: DataSet = {
    pgUrl: values.pg.replace(/\/+$/, ''),
    scale: crowd ? { ...scale, database: `${scale.database}_${shape}` } : scale,
    cliDir: '.',
    fresh: false,
  }
  const stops: (() => Promise<void>)[] = []
  try {
    const { monitor, mixes } = await prepareMixes(data, log, {
      ...(crowd ? { crowd } : {}),
      only: values.only,
    })
    stops.push(() => monitor.end())
    const openbook = await startOpenbook('openbook', '.', databaseUrl(data))
    stops.push(openbook.service.stop)
    await warmServer(
      openbook,
      mixes.map((mix) => ({ path: mix.path, key: mix.org.key })),
      settings,
    )
    const started = loadAverageText()
    for (const mix of mixes) {
      const saturated = await saturate(openbook, mix.path, mix.org.key, settings, monitor, true)
      const half = await halfLoad(openbook, mix.path, mix.org.key, settings, monitor, saturated.rps / 2)
      const p50 = half.p50 ?? Number.POSITIVE_INFINITY
      if (!(p50 <= TARGET_P50_MS)) missed++
      const failures = saturated.failures + half.failures
      log(
        `${shape} ${mix.id}: ${Math.round(saturated.rps)}/s saturated; at ${Math.round(half.rps)}/s p50 ` +
          `${half.p50?.toFixed(2)} p99 ${half.p99?.toFixed(2)} ms${failures ? ` FAILURES ${failures}` : ''}`,
      )
      rows.push(
        `| ${shape} | ${mix.id} | ${mix.label} | ${Math.round(saturated.rps)} | ${Math.round(half.rps)} | ` +
          `${half.p50?.toFixed(2)} | ${half.p99?.toFixed(2)} | ${failures} |`,
      )
    }
    log(`${shape}: load average ${started} at its start, ${loadAverageText()} at its end`)
  } finally {
    for (const stop of stops.reverse()) await stop().catch(() => undefined)
  }
}
killAll()
const loadAfter = loadAverageText()

const table = [
  `\`npm run bench:shapes -- --shapes ${values.shapes} --duration ${values.duration}\`: openbook (the built ` +
    `server) on PostgreSQL, the 100k scale with a crowd of ${values['shape-size'].replace(',', ' customers and ')} ` +
    `appointments at each shape as its largest organization; each of the crowd's pages at saturation ` +
    `(${settings.connections} connections, ${settings.duration} s after 1 s of warm-up), then at half that rate, ` +
    `evenly paced; ${cpus().length} cores, load average (1, 5, 15 min) ${loadBefore} before, ${loadAfter} after. ` +
    `Target: p50 at half load ≤ ${TARGET_P50_MS} ms; ${missed === 0 ? 'every page is within it' : `${missed} of ${rows.length} pages are not`}.`,
  '',
  '| shape | mix | page | req/s saturated | req/s half | p50 ms half | p99 ms half | failures |',
  '|---|---|---|---:|---:|---:|---:|---:|',
  ...rows,
].join('\n')
process.stdout.write(`${table}\n`)
if (values.write) writeResultsSection('postgres-shapes', `## PostgreSQL at each data shape\n\n${table}`)
