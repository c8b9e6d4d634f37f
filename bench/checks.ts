import type { CountPlan, SeedInfo } from './data.js'
import type { EmbeddedResult } from './embedded.js'
import type { LoadResult } from './load.js'
import type { LoadSettings, TargetResult } from './measure.js'
import type { OrgSize, PagePosition } from './mixes.js'
import type { BenchOptions, Scale } from './options.js'
import { median, rateRatio, type Saturation } from './rounds.js'

/** The HTTP targets and pgbench, by the names the tables use. */
export type TargetName = 'pgbench' | 'baseline' | 'openbook' | 'previous'

export interface MixResult {
  readonly id: string
  readonly label: string
  readonly size: OrgSize
  readonly position: PagePosition
  readonly path: string
  readonly pgbench?: TargetResult | undefined
  readonly baseline: TargetResult
  readonly openbook: TargetResult
  /**
   * openbook's saturation rounds asked with the shipped client's Accept-Encoding (compressed
   * pages); absent from a report written before it was measured.
   */
  readonly clientEncoding?: Saturation | undefined
  /** The older build (--previous-dir), when there is one. */
  readonly previous?: TargetResult | undefined
  /** The older build answered this request differently (status, total or ids). */
  readonly previousDisagrees?: string | undefined
  /**
   * openbook's req/s over the minimal handler's in each round where both were loaded at the same
   * time (bench/run.ts): whatever else the machine does then falls on both alike.
   */
  readonly sideBySide?: readonly number[] | undefined
}

export interface Machine {
  readonly cpus: number
  readonly model: string
  readonly memoryGiB: number
  readonly node: string
  readonly postgres: string
  readonly sharedBuffers: string
}

export interface ScaleReport {
  readonly scale: Scale
  readonly seed: SeedInfo
  readonly orgs: { size: OrgSize; id: string; plan: string; customers: number; appointments: number }[]
  readonly explain: CountPlan[]
  readonly mixes: MixResult[]
  /** Peak RSS (VmHWM) of each server over this scale's run, in MB. */
  readonly rss: { openbookMb: number; baselineMb: number; previousMb?: number | undefined }
  /** Load averages (1, 5, 15 min, from /proc/loadavg) when this scale's measurements started and ended. */
  readonly loadAverage: { start: number[]; end: number[] }
}

export interface BenchReport {
  readonly finishedAt: string
  readonly totalSeconds: number
  readonly command: string
  readonly machine: Machine
  readonly options: BenchOptions
  readonly load: LoadSettings
  /** The older build measured beside openbook: its directory and commit. */
  readonly previous?: { dir: string; commit: string } | undefined
  /** The build measured: its commit, and whether its working tree had changes. */
  readonly openbookCommit: string
  /**
   * A server that does no work, at a fixed rate: the latency floor of the machine; and at
   * saturation, with its CPU a request (absent from a report written before it was measured).
   */
  readonly floor: LoadResult & {
    rate: number
    saturation?: { rps: number; nodeMicros: number | null } | undefined
  }
  readonly scales: ScaleReport[]
  readonly embedded: EmbeddedResult
}

export interface Check {
  readonly target: string
  readonly met: boolean
  /** False where the run gave the target nothing to hold on (never met then either). */
  readonly measurable?: boolean
  readonly figures: string
}

/** A check's verdict as the table shows it. */
export const verdict = (check: Check) =>
  check.measurable === false ? 'not measurable' : check.met ? 'yes' : '**no**'

export const int = (value: number) => Math.round(value).toLocaleString('en-US')
export const ms = (value: number | null | undefined) =>
  value === null || value === undefined ? '–' : value < 10 ? value.toFixed(2) : value.toFixed(1)
/** openbook's req/s over the minimal handler's on the same mix. */
export const ratio = (mix: MixResult) => rateRatio(mix.openbook, mix.baseline)

/** The same ratio with both loaded at the same time: the median of its rounds, if it was measured. */
export const sideBySideRatio = (mix: MixResult): number | undefined =>
  mix.sideBySide?.length ? median(mix.sideBySide) : undefined
/** openbook's req/s over the older build's on the same mix; undefined without an older build. */
export const speedup = (mix: MixResult) => (mix.previous ? rateRatio(mix.openbook, mix.previous) : undefined)

/** CPU time per request in µs from a share of one core (per cent) and a rate (per second). */
export function microsPerRequest(cpuPercent: number | null, rps: number): number | null {
  if (cpuPercent === null || !(rps > 0)) return null
  return (cpuPercent / 100 / rps) * 1e6
}

/** PostgreSQL's CPU per request of one target on one mix, in µs. */
export const pgMicros = (result: TargetResult | undefined) =>
  result ? microsPerRequest(result.saturation.postgresCpu, result.saturation.rps) : null

/** Node's and PostgreSQL's CPU per request together, in µs: what a request costs whatever else runs. */
export function cpuMicros(result: TargetResult | undefined): number | null {
  if (!result) return null
  const node = microsPerRequest(result.saturation.serverCpu, result.saturation.rps)
  const pg = pgMicros(result)
  return node === null || pg === null ? null : node + pg
}

/**
 * How many times fewer CPU µs openbook spends per request than `other` (Node and PostgreSQL
 * together): the req/s ratio a machine with nothing else running would show if CPU is the limit.
 */
export function cpuSpeedup(mix: MixResult, other: 'baseline' | 'previous'): number | undefined {
  const mine = cpuMicros(mix.openbook)
  const theirs = cpuMicros(mix[other])
  return mine && theirs ? theirs / mine : undefined
}

const tag = (scale: Scale, mix: MixResult) => `${scale.name} ${mix.id}`
const smallAndMedium = (mixes: readonly MixResult[]) => mixes.filter((mix) => mix.size !== 'large')
const inf = (value: number | null | undefined) => value ?? Number.POSITIVE_INFINITY

function everyMix(
  report: BenchReport,
  pick: (mixes: readonly MixResult[]) => readonly MixResult[],
): { scale: Scale; mix: MixResult }[] {
  return report.scales.flatMap((s) => pick(s.mixes).map((mix) => ({ scale: s.scale, mix })))
}

/** The largest organization's every page at half load: p50 ≤ 5 ms. */
function largeP50Check(report: BenchReport): Check {
  const pages = everyMix(report, (mixes) => mixes.filter((mix) => mix.size === 'large'))
  const over = pages.filter(({ mix }) => inf(mix.openbook.half.p50) > 5)
  const worst = [...pages].sort((a, b) => inf(b.mix.openbook.half.p50) - inf(a.mix.openbook.half.p50))[0]
  return {
    target: 'largest organization, both scales: openbook p50 ≤ 5 ms at half load on every page',
    met: pages.length > 0 && over.length === 0,
    figures:
      (worst ? `highest ${tag(worst.scale, worst.mix)} ${ms(worst.mix.openbook.half.p50)} ms` : 'no mixes') +
      (over.length
        ? `; over 5 ms: ${over.map(({ scale, mix }) => `${tag(scale, mix)} ${ms(mix.openbook.half.p50)}`).join(', ')}`
        : ` (${pages.length} pages)`),
  }
}

/** PostgreSQL CPU per request at least 40 % below the older build's on small and medium mixes. */
function pgCpuCheck(report: BenchReport, commit: string): Check {
  const pairs = everyMix(report, smallAndMedium).map(({ scale, mix }) => {
    const now = pgMicros(mix.openbook)
    const before = pgMicros(mix.previous)
    return { scale, mix, now, before, cut: now !== null && before ? 1 - now / before : null }
  })
  return {
    target: `PostgreSQL CPU per request ≥ 40 % lower than ${commit}, small and medium organizations`,
    met: pairs.length > 0 && pairs.every((p) => p.cut !== null && p.cut >= 0.4),
    figures:
      pairs
        .map(
          (p) =>
            `${tag(p.scale, p.mix)} ${p.now === null ? '–' : int(p.now)} vs ${p.before === null ? '–' : int(p.before)} µs` +
            ` (${p.cut === null ? '–' : `−${Math.round(p.cut * 100)} %`})`,
        )
        .join(', ') || 'no mixes',
  }
}

function speedupCheck(report: BenchReport, commit: string): Check {
  const mixes = everyMix(report, smallAndMedium)
  return {
    target: `req/s ≥ 1.3× ${commit}, small and medium mixes`,
    met: mixes.length > 0 && mixes.every(({ mix }) => (speedup(mix) ?? 0) >= 1.3),
    figures:
      mixes.map(({ scale, mix }) => `${tag(scale, mix)} ${speedup(mix)?.toFixed(2) ?? '–'}×`).join(', ') ||
      'no mixes',
  }
}

function ratioCheck(report: BenchReport): Check {
  const mixes = everyMix(report, (m) => m)
  const sorted = [...mixes].sort((a, b) => ratio(a.mix) - ratio(b.mix))
  const below = sorted.filter(({ mix }) => ratio(mix) < 0.9)
  const [low, high] = [sorted[0], sorted.at(-1)]
  return {
    target: 'openbook ≥ 0.9× the minimal handler (req/s at saturation), every mix of both scales',
    met: mixes.length > 0 && below.length === 0,
    figures:
      low && high
        ? `lowest ${ratio(low.mix).toFixed(2)}× (${tag(low.scale, low.mix)}), highest ` +
          `${ratio(high.mix).toFixed(2)}× (${tag(high.scale, high.mix)}); ` +
          (below.length
            ? `${below.length} of ${mixes.length} below 0.9×: ` +
              below.map(({ scale, mix }) => `${tag(scale, mix)} ${ratio(mix).toFixed(2)}×`).join(', ')
            : `all ${mixes.length} at 0.9× or more`) +
          `; by CPU per request (Node + PostgreSQL) ${ratioRange(mixes, (mix) => cpuSpeedup(mix, 'baseline'), '–')}` +
          `; loaded side by side at the same time ${ratioRange(mixes, sideBySideRatio, 'not measured')}`
        : 'no mixes',
  }
}

/** The lowest and highest of a ratio over the mixes that have it, and how many are below 0.9×. */
function ratioRange(
  mixes: readonly { scale: Scale; mix: MixResult }[],
  pick: (mix: MixResult) => number | undefined,
  none: string,
): string {
  const values = mixes.flatMap(({ mix }) => {
    const value = pick(mix)
    return value === undefined ? [] : [value]
  })
  if (values.length === 0) return none
  const below = values.filter((value) => value < 0.9).length
  return `${Math.min(...values).toFixed(2)}–${Math.max(...values).toFixed(2)}×, ${below} of ${values.length} below 0.9×`
}

/** p99 ≤ 10 ms at half load on every mix where the minimal handler's own p99 is. */
function p99Check(report: BenchReport): Check {
  const where = everyMix(report, (mixes) => mixes.filter((mix) => inf(mix.baseline.half.p99) <= 10))
  const over = where.filter(({ mix }) => inf(mix.openbook.half.p99) > 10)
  const all = everyMix(report, (m) => m).length
  return {
    target: 'p99 ≤ 10 ms at half load wherever the minimal handler reaches it',
    // Where the minimal handler reaches it nowhere, the machine decided, and openbook proved nothing.
    met: where.length > 0 && over.length === 0,
    measurable: where.length > 0,
    figures:
      `the minimal handler reaches it on ${where.length} of ${all} mixes` +
      (where.length === 0 ? ' (not measurable in this run)' : '; openbook ') +
      (where.length === 0
        ? ''
        : over.length
          ? `over 10 ms on ${over.length}: ${over.map(({ scale, mix }) => `${tag(scale, mix)} ${ms(mix.openbook.half.p99)}`).join(', ')}`
          : `within 10 ms on all ${where.length}`),
  }
}

function embeddedChecks(embedded: EmbeddedResult): Check[] {
  return [
    {
      target: 'embedded store: peak RSS ≤ 300 MB (server process, demo, under load)',
      met: embedded.rssMb <= 300,
      figures: `${int(embedded.rssMb)} MB`,
    },
    {
      target: 'embedded store ≥ 400 req/s',
      met: embedded.mixes.length > 0 && embedded.mixes.every((mix) => mix.result.rps >= 400),
      figures: embedded.mixes.map((m) => `${m.id} ${int(m.result.rps)}/s`).join(', '),
    },
  ]
}

/** A server the ceiling targets are read of: openbook, or the minimal handler beside it. */
type Server = 'openbook' | 'baseline'

/**
 * A server's req/s over pgbench's tx/s on the same statements: identity, or the client's encoding
 * (openbook only: the minimal handler does not compress).
 */
export function ofCeiling(
  mix: MixResult,
  encoding: 'identity' | 'client',
  server: Server = 'openbook',
): number | undefined {
  const ours =
    encoding === 'identity'
      ? mix[server].saturation.rps
      : server === 'openbook'
        ? mix.clientEncoding?.rps
        : undefined
  const ceiling = mix.pgbench?.saturation.rps
  return ours !== undefined && ceiling ? ours / ceiling : undefined
}

/** A server's Node CPU per request over its PostgreSQL CPU per request (identity). */
export function nodeOverPostgres(mix: MixResult, server: Server = 'openbook'): number | undefined {
  const node = microsPerRequest(mix[server].saturation.serverCpu, mix[server].saturation.rps)
  const pg = pgMicros(mix[server])
  return node !== null && pg ? node / pg : undefined
}

interface Bound {
  readonly min?: number
  readonly max?: number
}

/** `pick` of every mix against a bound: the mixes measured, those outside it, the lowest and highest. */
function spreadOf(report: BenchReport, pick: (mix: MixResult) => number | undefined, bound: Bound) {
  const values = everyMix(report, (m) => m).map(({ scale, mix }) => ({ scale, mix, value: pick(mix) }))
  const measured = values.filter((v): v is typeof v & { value: number } => v.value !== undefined)
  const outside = measured.filter(
    ({ value }) =>
      (bound.min !== undefined && value < bound.min) || (bound.max !== undefined && value > bound.max),
  )
  const sorted = [...measured].sort((a, b) => a.value - b.value)
  return { total: values.length, measured, outside, low: sorted[0], high: sorted.at(-1) }
}

type Spread = ReturnType<typeof spreadOf>

/** Every mix within its bound (`spreadOf`), with the lowest and highest and those outside. */
function everyMixWithin(target: string, { total, measured, outside, low, high }: Spread): Check {
  return {
    target,
    measurable: measured.length > 0,
    met: measured.length > 0 && measured.length === total && outside.length === 0,
    figures:
      low && high
        ? `${low.value.toFixed(2)} (${tag(low.scale, low.mix)}) to ${high.value.toFixed(2)} (${tag(high.scale, high.mix)})` +
          (outside.length
            ? `; ${outside.length} of ${total} outside: ${outside.map((v) => `${tag(v.scale, v.mix)} ${v.value.toFixed(2)}`).join(', ')}`
            : `; all ${total} mixes`) +
          (measured.length < total ? `; ${total - measured.length} not measured` : '')
        : 'not measured',
  }
}

/**
 * The same bound read of the minimal handler (node:http and pg, the same statements sent the same
 * way, no framework): whether the target is within reach of any server built so on this machine.
 */
function minimalHandlerAlongside(check: Check, { total, measured, outside, low, high }: Spread): Check {
  if (!low || !high) return check
  return {
    ...check,
    figures:
      `${check.figures}. The minimal handler on the same mixes: ${low.value.toFixed(2)} to ` +
      `${high.value.toFixed(2)}, ${outside.length} of ${measured.length} outside` +
      (measured.length < total ? ` (${total - measured.length} not measured)` : ''),
  }
}

/** openbook beside the database's own ceiling (pgbench on the same statements, the same run). */
export function ceilingChecks(report: BenchReport): Check[] {
  const identity = (server: Server) => (mix: MixResult) => ofCeiling(mix, 'identity', server)
  const cpu = (server: Server) => (mix: MixResult) => nodeOverPostgres(mix, server)
  const ceiling = { min: 0.6 }
  const nodeShare = { max: 0.6 }
  return [
    minimalHandlerAlongside(
      everyMixWithin(
        "openbook ≥ 0.6× pgbench's saturated req/s, identity, every mix",
        spreadOf(report, identity('openbook'), ceiling),
      ),
      spreadOf(report, identity('baseline'), ceiling),
    ),
    everyMixWithin(
      "openbook ≥ 0.5× pgbench's saturated req/s with the client's Accept-Encoding, every mix",
      spreadOf(report, (mix) => ofCeiling(mix, 'client'), { min: 0.5 }),
    ),
    minimalHandlerAlongside(
      everyMixWithin(
        "openbook's Node CPU per request ≤ 0.6× its PostgreSQL CPU, every mix",
        spreadOf(report, cpu('openbook'), nodeShare),
      ),
      spreadOf(report, cpu('baseline'), nodeShare),
    ),
  ]
}

/** The service benchmark's targets, each with the figures that decide it. */
export function checks(report: BenchReport): Check[] {
  const commit = report.previous?.commit
  return [
    ...ceilingChecks(report),
    largeP50Check(report),
    ...(commit ? [pgCpuCheck(report, commit), speedupCheck(report, commit)] : []),
    ratioCheck(report),
    p99Check(report),
    ...embeddedChecks(report.embedded),
  ]
}

/** Targets of the earlier issue, kept so that a regression shows. */
export function earlierChecks(report: BenchReport): Check[] {
  const plans = report.scales.flatMap((s) => s.explain.map((plan) => ({ scale: s.scale, plan })))
  const rss = Math.max(...report.scales.map((s) => s.rss.openbookMb))
  return [
    {
      target: 'exact total for the largest organization without reading the table (EXPLAIN ANALYZE)',
      met: plans.length > 0 && plans.every(({ plan }) => !plan.readsTable && !plan.heapFetches),
      figures: plans
        .map(
          ({ scale, plan }) =>
            `${scale.name} ${plan.label}: ${ms(plan.ms)} ms${plan.readsTable ? ', reads the table' : ''}`,
        )
        .join('; '),
    },
    {
      target: 'server RSS < 200 MB on PostgreSQL',
      met: rss < 200,
      figures: `openbook peak ${int(rss)} MB`,
    },
  ]
}
