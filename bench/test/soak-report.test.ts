import { describe, expect, it } from 'vitest'
import { percentile, type SoakRow, soakTable, soakVerdict, type TableStats } from '../soak-report.js'

const MB = 1024 * 1024
const stats = (mb: number): TableStats => ({
  table: mb * MB * 0.6,
  indexes: mb * MB * 0.4,
  dead: 0,
  autovacuums: 0,
})

/** A row with sizes in MB: list_changes, buckets + list_folds (split evenly), the data (split evenly). */
function row(
  minutes: number,
  changes: number,
  folded: number,
  data: number,
  p50: number | null,
  p99: number | null,
): SoakRow {
  return {
    minutes,
    writes: minutes * 100,
    retries: 0,
    errors: 0,
    tables: {
      list_changes: stats(changes),
      buckets: stats(folded / 2),
      list_folds: stats(folded / 2),
      appointments: stats(data / 2),
      customers: stats(data / 2),
    },
    pendingTotal: 0,
    pendingMost: 0,
    p50,
    p99,
    pages: p50 === null ? 0 : 100,
    load1: 1,
  }
}

describe('percentile', () => {
  it('is the nearest-rank value of an ascending list', () => {
    const sorted = Array.from({ length: 100 }, (_, i) => i + 1)
    expect(percentile(sorted, 0.5)).toBe(50)
    expect(percentile(sorted, 0.99)).toBe(99)
    expect(percentile(sorted, 1)).toBe(100)
    expect(percentile([7], 0.99)).toBe(7)
    expect(percentile([], 0.5)).toBeNaN()
  })
})

describe('soakVerdict', () => {
  it('finds nothing when the folded state grows as the data and list_changes levels off', () => {
    const rows = [
      row(0, 0.1, 10, 100, null, null),
      row(5, 3, 10.5, 105, 10, 40),
      row(10, 3.2, 11, 110, 11, 44),
    ]
    const verdict = soakVerdict(rows)
    expect(verdict.foldedGrowth).toBeCloseTo(1.1, 5)
    expect(verdict.dataGrowth).toBeCloseTo(1.1, 5)
    expect(verdict.growsBeyondData).toBe(false)
    expect(verdict.stillGrowing).toEqual([])
    expect(verdict.latencyDrifts).toBe(false)
    expect(verdict.p99Drift).toBeCloseTo(1.1, 5)
  })

  it('says so when buckets grow beyond the data', () => {
    const rows = [row(0, 0.1, 10, 100, null, null), row(5, 3, 13, 105, 10, 40), row(10, 3, 16, 110, 10, 40)]
    const verdict = soakVerdict(rows)
    expect(verdict.growsBeyondData).toBe(true)
    expect(verdict.lines[0]).toContain('grow beyond the data')
  })

  it('says so when list_changes still grows in the second half (bloat)', () => {
    const rows = [row(0, 0.1, 10, 100, null, null), row(5, 5, 10, 100, 10, 40), row(10, 9, 10, 100, 10, 40)]
    expect(soakVerdict(rows).stillGrowing).toEqual(['list_changes'])
  })

  it('measures drift from the first timed interval, not the row before any read', () => {
    const rows = [row(0, 0.1, 10, 100, null, null), row(5, 1, 10, 100, 10, 40), row(10, 1, 10, 100, 12, 80)]
    const verdict = soakVerdict(rows)
    expect(verdict.p50Drift).toBeCloseTo(1.2, 5)
    expect(verdict.p99Drift).toBeCloseTo(2, 5)
    expect(verdict.latencyDrifts).toBe(true)
  })

  it('needs the first row and two intervals', () => {
    expect(() => soakVerdict([row(0, 0, 1, 1, null, null), row(5, 0, 1, 1, 1, 1)])).toThrow(/two intervals/)
  })
})

describe('soakTable', () => {
  it('has a row per report and as many cells as its header', () => {
    const lines = soakTable([row(0, 0.1, 10, 100, null, null), row(5, 3, 10.5, 105, 10, 40)])
    expect(lines).toHaveLength(4)
    const cells = (line: string) => line.split('|').length
    expect(cells(lines[2] as string)).toBe(cells(lines[0] as string))
    expect(lines[3]).toContain('10.0 / 40.0')
    expect(lines[2]).toContain('– / –')
  })
})
