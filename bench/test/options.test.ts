import { describe, expect, it } from 'vitest'
import { assertLoopbackUrl, parseOptions, SCALES } from '../options.js'

describe('parseOptions', () => {
  it('runs both scales, pgbench and no older build by default', () => {
    const options = parseOptions([], '/repo')
    expect(options.scales.map((scale) => scale.name)).toEqual(['full', '100k'])
    expect(options.pgbench).toBe(true)
    expect(options.build).toBe(true)
    expect(options.openbookDir).toBe('.')
  })

  it('takes build directories relative to where the command was started', () => {
    const options = parseOptions(['--openbook-dir', 'here', '--previous-dir', '../old'], '/work/repo')
    expect(options.openbookDir).toBe('/work/repo/here')
    expect(options.previousDir).toBe('/work/old')
    // Another directory's build is not made by the benchmark.
    expect(options.build).toBe(false)
  })

  it('picks scales by name and refuses an unknown one', () => {
    expect(parseOptions(['--scales', '100k'], '/').scales).toEqual([SCALES['100k']])
    expect(() => parseOptions(['--scales', 'huge'], '/')).toThrow(/unknown scale huge/)
  })

  it('adds a crowded organization of a data shape in a database of its own', () => {
    expect(parseOptions([], '/').crowd).toBeUndefined()
    const options = parseOptions(['--scales', '100k', '--shape', 'instant'], '/')
    expect(options.crowd).toEqual({ shape: 'instant', customers: 300_000, appointments: 600_000 })
    expect(options.scales.map((scale) => scale.database)).toEqual(['openbook_bench_100k_instant'])
    expect(parseOptions(['--shape', 'sparse', '--shape-size', '10,20'], '/').crowd).toEqual({
      shape: 'sparse',
      customers: 10,
      appointments: 20,
    })
    expect(() => parseOptions(['--shape', 'lumpy'], '/')).toThrow(/unknown shape lumpy/)
    expect(() => parseOptions(['--shape', 'instant', '--shape-size', '10'], '/')).toThrow(/shape-size/)
  })

  it('refuses a duration that is not a whole number of seconds', () => {
    expect(parseOptions(['--duration', '3'], '/').duration).toBe(3)
    expect(() => parseOptions(['--duration', '0'], '/')).toThrow(/whole number/)
    expect(() => parseOptions(['--duration', '2.5'], '/')).toThrow(/whole number/)
  })

  it('loads each server in three saturation rounds unless told otherwise', () => {
    expect(parseOptions([], '/').rounds).toBe(3)
    expect(parseOptions(['--rounds', '1'], '/').rounds).toBe(1)
    expect(() => parseOptions(['--rounds', '0'], '/')).toThrow(/whole number ≥ 1/)
  })
})

describe('the scales', () => {
  it('are the two data sets in databases of their own', () => {
    expect(SCALES['100k']).toMatchObject({ orgs: 100, customers: 100_000, appointments: 200_000, seed: 1 })
    expect(SCALES.full).toMatchObject({ orgs: 200, customers: 1_000_000, appointments: 2_000_000 })
    expect(SCALES.full.database).not.toBe(SCALES['100k'].database)
  })
})

describe('assertLoopbackUrl', () => {
  it('accepts loopback only', () => {
    expect(() => assertLoopbackUrl('postgres://root@127.0.0.1:5432')).not.toThrow()
    expect(() => assertLoopbackUrl('postgres://root@localhost')).not.toThrow()
    expect(() => assertLoopbackUrl('postgres://root@db.example.com')).toThrow(/non-loopback/)
  })
})
