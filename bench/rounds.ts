/**
 * Saturation in rounds (bench/run.ts): each server is loaded several times on a mix, the servers
 * taking turns, so that the rest of a shared machine's load falls on every server alike. Pure
 * logic, unit-tested.
 */
import type { LoadResult } from './load.js'
import type { Usage } from './meter.js'

/** One saturation measurement of one target. */
export type Saturation = LoadResult & Usage

/** One target on one mix: as fast as it goes, then at half that rate for latency. */
export interface TargetResult {
  /** Every saturation round together: requests and CPU summed over them, latencies of the last. */
  readonly saturation: LoadResult & Usage
  /** req/s of each saturation round, in the order they ran (interleaved with the other targets'). */
  readonly rounds?: readonly number[]
  /** Latency at half load: the median p50 and p99 of its rounds. */
  readonly half: LoadResult
  /** p99 of each latency round, in the order they ran. */
  readonly halfP99s?: readonly (number | null)[]
}

/** The middle value (the mean of the two middle ones for an even count). */
export function median(values: readonly number[]): number {
  const sorted = [...values].sort((a, b) => a - b)
  const middle = sorted.length >> 1
  if (sorted.length === 0) return Number.NaN
  return sorted.length % 2
    ? (sorted[middle] ?? Number.NaN)
    : ((sorted[middle - 1] ?? 0) + (sorted[middle] ?? 0)) / 2
}

/**
 * One target's req/s over another's: the median of the ratios within each saturation round, where
 * both were measured in the same rounds; else the ratio of their mean rates.
 */
export function rateRatio(target: TargetResult, other: TargetResult): number {
  const ours = target.rounds
  const theirs = other.rounds
  if (ours && theirs && ours.length === theirs.length && ours.length > 0)
    return median(ours.map((rps, round) => rps / (theirs[round] ?? Number.NaN)))
  return target.saturation.rps / other.saturation.rps
}

/**
 * Rounds of equal length as one measurement: requests, failures and CPU shares averaged over
 * them (CPU per request is then total CPU over total requests), latencies of the last round.
 */
export function combineRounds(rounds: readonly Saturation[]): Saturation {
  const last = rounds.at(-1)
  if (!last) throw new Error('no saturation round')
  const mean = (pick: (round: Saturation) => number) =>
    rounds.reduce((sum, r) => sum + pick(r), 0) / rounds.length
  return {
    rps: mean((r) => r.rps),
    p50: last.p50,
    p99: last.p99,
    ok: rounds.reduce((sum, r) => sum + r.ok, 0),
    failures: rounds.reduce((sum, r) => sum + r.failures, 0),
    serverCpu: last.serverCpu === null ? null : mean((r) => r.serverCpu ?? 0),
    postgresCpu: mean((r) => r.postgresCpu),
    otherCpu: mean((r) => r.otherCpu),
  }
}

/**
 * Latency rounds at one rate as one result: the median p50 and p99 of the rounds (one burst of
 * other load on the machine moves one round's p99, not the result), rates averaged, counts summed.
 */
export function combineLatencyRounds(rounds: readonly LoadResult[]): LoadResult {
  if (rounds.length === 0) throw new Error('no latency round')
  const middle = (pick: (round: LoadResult) => number | null) => {
    const values = rounds.flatMap((round) => {
      const value = pick(round)
      return value === null ? [] : [value]
    })
    return values.length ? median(values) : null
  }
  return {
    rps: rounds.reduce((sum, r) => sum + r.rps, 0) / rounds.length,
    p50: middle((r) => r.p50),
    p99: middle((r) => r.p99),
    ok: rounds.reduce((sum, r) => sum + r.ok, 0),
    failures: rounds.reduce((sum, r) => sum + r.failures, 0),
  }
}
