import { describe, expect, it } from 'vitest'
import type { TargetResult } from '../measure.js'
import { combineLatencyRounds, combineRounds, median, rateRatio, type Saturation } from '../rounds.js'

const round = (rps: number, serverCpu: number | null = 50, p99 = 9): Saturation => ({
  rps,
  p50: 1,
  p99,
  ok: rps * 3,
  failures: 0,
  serverCpu,
  postgresCpu: 100,
  otherCpu: 5,
})

const result = (rounds: readonly number[] | undefined, rps = 500): TargetResult => ({
  saturation: round(rps),
  ...(rounds ? { rounds } : {}),
  half: { rps: rps / 2, p50: 1, p99: 2, ok: 1, failures: 0 },
})

describe('median', () => {
  it('is the middle value, or the mean of the two middle ones', () => {
    expect(median([3, 1, 2])).toBe(2)
    expect(median([4, 1, 3, 2])).toBe(2.5)
    expect(median([7])).toBe(7)
    expect(median([])).toBeNaN()
  })
})

describe('rateRatio', () => {
  it('takes the ratio within each round, then their median', () => {
    // Round 2 ran while the machine was busy for both: per-round ratios 0.9, 1.0, 0.95.
    const ours = result([900, 500, 950])
    const theirs = result([1000, 500, 1000])
    expect(rateRatio(ours, theirs)).toBeCloseTo(0.95, 10)
  })

  it('is not moved by one round that fell on a single target', () => {
    // The second round of `ours` met another process's burst: the median ignores it, a mean would not.
    const ours = result([1000, 600, 1000], 867)
    const theirs = result([1000, 1000, 1000], 1000)
    expect(rateRatio(ours, theirs)).toBe(1)
    expect(ours.saturation.rps / theirs.saturation.rps).toBeLessThan(0.9)
  })

  it('falls back to the ratio of the mean rates without matching rounds', () => {
    expect(rateRatio(result(undefined, 450), result(undefined, 500))).toBeCloseTo(0.9, 10)
    expect(rateRatio(result([1, 2], 450), result([1, 2, 3], 500))).toBeCloseTo(0.9, 10)
  })
})

describe('combineRounds', () => {
  it('averages rates and CPU shares, sums requests, keeps the last latencies', () => {
    const combined = combineRounds([round(400, 40, 8), round(600, 60, 12)])
    expect(combined.rps).toBe(500)
    expect(combined.serverCpu).toBe(50)
    expect(combined.ok).toBe(3000)
    expect(combined.p99).toBe(12)
  })

  it('keeps a target without a server process (pgbench) without one', () => {
    expect(combineRounds([round(400, null)]).serverCpu).toBeNull()
  })

  it('refuses no rounds at all', () => {
    expect(() => combineRounds([])).toThrow(/no saturation round/)
  })
})

describe('combineLatencyRounds', () => {
  const latency = (p50: number | null, p99: number | null) => ({ rps: 250, p50, p99, ok: 1000, failures: 1 })

  it('takes the median p50 and p99 of the rounds, so that one burst moves one round only', () => {
    const combined = combineLatencyRounds([latency(2, 9), latency(3, 48), latency(2.5, 8)])
    expect(combined.p50).toBe(2.5)
    expect(combined.p99).toBe(9)
    expect(combined.ok).toBe(3000)
    expect(combined.failures).toBe(3)
  })

  it('leaves out rounds without an answer, and has no percentile without any', () => {
    expect(combineLatencyRounds([latency(null, null), latency(4, 12)]).p99).toBe(12)
    expect(combineLatencyRounds([latency(null, null)]).p99).toBeNull()
    expect(() => combineLatencyRounds([])).toThrow(/no latency round/)
  })
})
