import { describe, expect, it } from 'vitest'
import { percentile, pgOptions } from '../load.js'

describe('percentile (nearest rank)', () => {
  const sorted = Float64Array.from({ length: 100 }, (_, i) => i + 1)

  it('takes the value at the rank, not an interpolation', () => {
    expect(percentile(sorted, 50)).toBe(50)
    expect(percentile(sorted, 99)).toBe(99)
    expect(percentile(sorted, 100)).toBe(100)
    expect(percentile(Float64Array.from([1, 2, 3]), 50)).toBe(2)
  })

  it('stays within the values at the ends, and has none for no values', () => {
    expect(percentile(sorted, 0)).toBe(1)
    expect(percentile(Float64Array.from([7]), 99)).toBe(7)
    expect(percentile(new Float64Array(), 50)).toBeNull()
  })
})

describe('pgOptions (PGOPTIONS of pgbench sessions)', () => {
  it('writes each setting as -c name=value, escaping spaces and backslashes in the value', () => {
    expect(pgOptions({ role: 'openbook_reader', DateStyle: 'ISO, YMD', x: 'a\\b' })).toBe(
      '-c role=openbook_reader -c DateStyle=ISO,\\ YMD -c x=a\\\\b',
    )
  })
})
