import type { CountPlan, SeedInfo } from './data.js'
import type { EmbeddedResult } from './embedded.js'
import type { LoadResult } from './load.js'
import type { LoadSettings, TargetResult } from './measure.js'
import type { OrgSize, PagePosition } from './mixes.js'
import type { BenchOptions } from './options.js'

export interface MixResult {
  readonly id: string
  readonly label: string
  readonly size: OrgSize
  readonly position: PagePosition
  readonly path: string
  readonly pgbench: TargetResult
  readonly baseline: TargetResult
  readonly openbook: TargetResult
}

export interface Machine {
  readonly cpus: number
  readonly model: string
  readonly memoryGiB: number
  readonly node: string
  readonly postgres: string
  readonly sharedBuffers: string
}

export interface BenchReport {
  readonly finishedAt: string
  readonly totalSeconds: number
  readonly command: string
  readonly machine: Machine
  readonly options: BenchOptions
  readonly load: LoadSettings
  /** A server that does no work, at a fixed rate: the latency floor of the machine. */
  readonly floor: LoadResult & { rate: number }
  readonly seed: SeedInfo
  readonly orgs: { size: OrgSize; id: string; plan: string; customers: number; appointments: number }[]
  readonly explain: CountPlan[]
  readonly mixes: MixResult[]
  readonly rss: { openbookMb: number; baselineMb: number }
  readonly embedded: EmbeddedResult
}

export interface Check {
  readonly target: string
  readonly met: boolean
  readonly figures: string
}

export const int = (value: number) => Math.round(value).toLocaleString('en-US')
export const ms = (value: number | null) =>
  value === null ? '–' : value < 10 ? value.toFixed(2) : value.toFixed(1)
export const ratio = (mix: MixResult) => mix.openbook.saturation.rps / mix.baseline.saturation.rps
const p50 = (result: LoadResult) => result.p50 ?? Number.POSITIVE_INFINITY
const p99 = (mix: MixResult) => mix.openbook.half.p99 ?? Number.POSITIVE_INFINITY

function ratioCheck(mixes: readonly MixResult[]): Check {
  const sorted = [...mixes].sort((a, b) => ratio(a) - ratio(b))
  const below = sorted.filter((mix) => ratio(mix) < 0.9)
  const [low, high] = [sorted[0], sorted.at(-1)]
  return {
    target: 'openbook ≥ 0.9× the minimal handler (req/s at saturation) on every mix',
    met: below.length === 0,
    figures:
      low && high
        ? `lowest ${ratio(low).toFixed(2)}× (${low.id}), highest ${ratio(high).toFixed(2)}× (${high.id})` +
          (below.length
            ? `; below 0.9×: ${below.map((m) => `${m.id} ${ratio(m).toFixed(2)}×`).join(', ')}`
            : '')
        : 'no mixes',
  }
}

function p99Check(target: string, mixes: readonly MixResult[], limit: number): Check {
  return {
    target,
    met: mixes.length > 0 && mixes.every((mix) => p99(mix) <= limit),
    figures: mixes.map((mix) => `${mix.id} ${ms(p99(mix))} ms`).join(', ') || 'no mixes',
  }
}

function deepPageCheck(mixes: readonly MixResult[]): Check {
  const pairs = mixes
    .filter((mix) => mix.size === 'large' && mix.position === 'last')
    .flatMap((last) => {
      const first = mixes.find((mix) => mix.id === last.id.replace(/last$/, 'first'))
      return first ? [{ last, first, factor: p50(last.openbook.half) / p50(first.openbook.half) }] : []
    })
  return {
    target: 'last page of the largest organization within 3× the first page (openbook p50 at 50% load)',
    met: pairs.length > 0 && pairs.every((pair) => pair.factor <= 3),
    figures:
      pairs
        .map(
          (p) =>
            `${p.last.id} ${ms(p.last.openbook.half.p50)} ms vs ${p.first.id} ${ms(p.first.openbook.half.p50)} ms (${p.factor.toFixed(1)}×)`,
        )
        .join('; ') || 'no mixes',
  }
}

/** The issue's targets, each with the figures that decide it. */
export function checks(report: BenchReport): Check[] {
  const { mixes, embedded } = report
  const largeFiltered = mixes.filter(
    (mix) => mix.size === 'large' && mix.position === 'first' && /status=|Date=|customerId=/.test(mix.path),
  )
  return [
    ratioCheck(mixes),
    p99Check(
      'p99 ≤ 10 ms at 50% of saturation, small and medium organizations',
      mixes.filter((mix) => mix.size !== 'large'),
      10,
    ),
    p99Check(
      'p99 ≤ 25 ms at 50% of saturation, largest organization, first page with filters',
      largeFiltered,
      25,
    ),
    {
      target: 'exact total for the largest organization without scanning the table (EXPLAIN ANALYZE)',
      met: report.explain.length > 0 && report.explain.every((plan) => !plan.readsTable && !plan.heapFetches),
      figures: report.explain
        .map(
          (plan) =>
            `${plan.label}: ${ms(plan.ms)} ms, ${plan.readsTable ? 'reads the table' : 'no table row read'}`,
        )
        .join('; '),
    },
    deepPageCheck(mixes),
    {
      target: 'embedded store ≥ 300 req/s',
      met: embedded.mixes.length > 0 && embedded.mixes.every((mix) => mix.result.rps >= 300),
      figures: embedded.mixes.map((m) => `${m.id} ${int(m.result.rps)}/s`).join(', '),
    },
    {
      target: 'server RSS < 200 MB on PostgreSQL',
      met: report.rss.openbookMb < 200,
      figures: `openbook peak ${int(report.rss.openbookMb)} MB`,
    },
  ]
}
