/**
 * The embedded store at each data shape, without the PostgreSQL half of
 * `npm run bench`: for each shape, the built server's first start on a new DATA_DIR, the crowd
 * (`--shape-size`, default 300,000 customers and 600,000 appointments) added to its demo
 * organization, and the crowd's pages (first, middle, last; customers, appointments, a status, a
 * date range) at saturation and at half that rate, as `npm run bench` measures them
 * (bench/embedded.ts).
 *
 *   npm run build && npm run bench:embedded -- [--shapes instant,ninety,sparse] [--duration 3]
 *     [--connections 16] [--shape-size 300000,600000] [--write]
 *
 * `--write` puts the table into bench/RESULTS.md between the embedded-shapes markers.
 */
import { mkdtempSync, rmSync } from 'node:fs'
import { cpus, tmpdir } from 'node:os'
import { join } from 'node:path'
import { parseArgs } from 'node:util'
import { type EmbeddedMix, measureEmbedded } from './embedded.js'
import { parseCrowd, SHAPE_OPTIONS, shapeLoadSettings } from './options.js'
import { runFromRoot } from './paths.js'
import { loadAverageText } from './proc.js'
import { writeResultsSection } from './report.js'

runFromRoot()

const { values } = parseArgs({ options: SHAPE_OPTIONS })
const settings = shapeLoadSettings(values, 1)
const log = (line: string) => process.stderr.write(`[${new Date().toISOString().slice(11, 19)}] ${line}\n`)
const load = loadAverageText

const loadBefore = load()
const rows: string[] = []
for (const shape of values.shapes.split(',')) {
  const crowd = parseCrowd(shape, values['shape-size'])
  if (!crowd) throw new Error(`--shapes: ${shape} is not a crowded shape (instant, ninety, sparse)`)
  const workDir = mkdtempSync(join(tmpdir(), 'openbook-embedded-shapes-'))
  const stops: (() => Promise<void>)[] = []
  try {
    const started = load()
    const { mixes } = await measureEmbedded(workDir, settings, log, (stop) => stops.push(stop), '.', crowd)
    const crowdMixes = mixes.filter((mix): mix is EmbeddedMix & { half: NonNullable<EmbeddedMix['half']> } =>
      Boolean(mix.half),
    )
    for (const mix of crowdMixes) {
      rows.push(
        `| ${shape} | ${mix.label.replace(' · crowd · ', ' · ')} | ${Math.round(mix.result.rps)} | ${Math.round(mix.half.rps)} | ` +
          `${mix.half.p50?.toFixed(1)} | ${mix.half.p99?.toFixed(1)} |`,
      )
    }
    log(`${shape}: load average ${started} at its start, ${load()} at its end`)
  } finally {
    for (const stop of stops) await stop().catch(() => undefined)
    rmSync(workDir, { recursive: true, force: true })
  }
}
const loadAfter = load()

const table = [
  `\`npm run bench:embedded -- --shapes ${values.shapes} --duration ${values.duration}\`: the built server on ` +
    `the embedded store, the demo organization with a crowd of ${values['shape-size'].replace(',', ' customers and ')} ` +
    `appointments at each shape; ${settings.connections} connections at saturation (${settings.duration} s after 1 s ` +
    `of warm-up), then half that rate, evenly paced; ${cpus().length} cores, load average (1, 5, 15 min) ` +
    `${loadBefore} before, ${loadAfter} after.`,
  '',
  '| shape | page | req/s saturated | req/s half | p50 ms half | p99 ms half |',
  '|---|---|---:|---:|---:|---:|',
  ...rows,
].join('\n')
process.stdout.write(`${table}\n`)
if (values.write) writeResultsSection('embedded-shapes', `## Embedded store at each data shape\n\n${table}`)
