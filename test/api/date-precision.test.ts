import type { FastifyInstance } from 'fastify'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { toMicroseconds } from '../../src/schemas/query.js'
import { bearer, buildTestApp } from '../helpers/app.js'
import { addAppointments, createKey, createOrg } from '../helpers/fixtures.js'
import { describeEachStore } from '../helpers/stores.js'

/**
 * startDate and endDate take up to 9 fractional-second digits (RFC 3339 sets no limit; 9 is
 * nanoseconds, the finest any common clock or library writes). The database keeps microseconds,
 * so both bounds are brought to the microsecond in the direction that keeps them exact: startDate
 * up, endDate down. Rounding to the nearest, as PostgreSQL does with a longer literal, would let
 * a bound take in a start time just outside it.
 */
describe('toMicroseconds', () => {
  it.each([
    ['2025-01-01T00:00:00Z', 'up', '2025-01-01T00:00:00Z'],
    ['2025-01-01T00:00:00.123Z', 'up', '2025-01-01T00:00:00.123Z'],
    ['2025-01-01T00:00:00.1234560Z', 'up', '2025-01-01T00:00:00.123456Z'],
    ['2025-01-01T00:00:00.1234561Z', 'up', '2025-01-01T00:00:00.123457Z'],
    ['2025-01-01T00:00:00.1234569Z', 'down', '2025-01-01T00:00:00.123456Z'],
    ['2025-01-01T00:00:00.000000001+0100', 'up', '2025-01-01T00:00:00.000001+0100'],
    ['2025-12-31T23:59:59.999999001Z', 'up', '2026-01-01T00:00:00.000000Z'],
    ['2024-02-28T23:59:59.9999991+05:30', 'up', '2024-02-29T00:00:00.000000+05:30'],
    ['2023-02-28T23:59:59.9999991-15:59', 'up', '2023-03-01T00:00:00.000000-15:59'],
    ['2025-12-31T23:59:59.999999999Z', 'down', '2025-12-31T23:59:59.999999Z'],
    // No later wall-clock second exists: the last microsecond stands in for it.
    ['9999-12-31T23:59:59.9999991Z', 'up', '9999-12-31T23:59:59.999999Z'],
  ] as const)('%s rounded %s: %s', (value, rounding, expected) => {
    expect(toMicroseconds(value, rounding)).toBe(expected)
  })
})

describeEachStore('date filters to the microsecond on %s', (testStore) => {
  let app: FastifyInstance
  let key: string

  beforeAll(async () => {
    const org = await createOrg(testStore.store, 'org_dates')
    await addAppointments(testStore.store, org.id, [
      { id: 'apt_a', start: '2025-01-01T00:00:00.000001Z' },
      { id: 'apt_b', start: '2025-01-01T00:00:00.000002Z' },
      { id: 'apt_d', start: '2025-01-01T00:00:00.999999Z' },
      { id: 'apt_c', start: '2025-01-01T00:00:01Z' },
    ])
    key = (await createKey(testStore.store, org)).key
    ;({ app } = await buildTestApp(testStore.store, { logLevel: 'silent' }))
  })
  afterAll(async () => {
    await app?.close()
  })

  /** The ids a query selects, in the list's order (latest start first); the total must agree. */
  const ids = async (query: Record<string, string>) => {
    const response = await app.inject({
      url: `/api/public/v1/appointments?${new URLSearchParams(query)}`,
      headers: bearer(key),
    })
    expect(response.statusCode, JSON.stringify(query) + response.body).toBe(200)
    const body = response.json<{ data: { id: string }[]; pagination: { total: number } }>()
    expect(body.pagination.total).toBe(body.data.length)
    return body.data.map((item) => item.id)
  }

  it('startDate is inclusive to the microsecond: digits past the sixth round it up', async () => {
    expect(await ids({ startDate: '2025-01-01T00:00:00.000001Z' })).toEqual([
      'apt_c',
      'apt_d',
      'apt_b',
      'apt_a',
    ])
    // .0000011 is after apt_a (.000001): nearest rounding would take apt_a in.
    expect(await ids({ startDate: '2025-01-01T00:00:00.0000011Z' })).toEqual(['apt_c', 'apt_d', 'apt_b'])
    expect(await ids({ startDate: '2025-01-01T00:00:00.000002000Z' })).toEqual(['apt_c', 'apt_d', 'apt_b'])
    // Rounding up carries into the seconds, here on a wall clock one hour ahead of UTC.
    expect(await ids({ startDate: '2025-01-01T01:00:00.9999991+01:00' })).toEqual(['apt_c'])
    expect(await ids({ startDate: '2025-01-01T00:00:00.999999001Z' })).toEqual(['apt_c'])
  })

  it('endDate is inclusive to the microsecond: digits past the sixth are dropped', async () => {
    // .0000019 is before apt_b (.000002): nearest rounding would take apt_b in.
    expect(await ids({ endDate: '2025-01-01T00:00:00.0000019Z' })).toEqual(['apt_a'])
    expect(await ids({ endDate: '2025-01-01T00:00:00.9999999Z' })).toEqual(['apt_d', 'apt_b', 'apt_a'])
    expect(await ids({ endDate: '2025-01-01T00:00:01.000000000Z' })).toEqual([
      'apt_c',
      'apt_d',
      'apt_b',
      'apt_a',
    ])
  })

  it('both bounds on the same instant past the microsecond select nothing, without an error', async () => {
    const instant = '2025-01-01T00:00:00.0000015Z'
    expect(await ids({ startDate: instant, endDate: instant })).toEqual([])
  })

  it('lower-case t and z (RFC 3339 5.6) are accepted', async () => {
    expect(await ids({ startDate: '2025-01-01t00:00:00.000002z' })).toEqual(['apt_c', 'apt_d', 'apt_b'])
    expect(await ids({ endDate: '2025-01-01t00:00:00.000001z' })).toEqual(['apt_a'])
    expect(await ids({ endDate: '2025-01-01t01:00:00.000001+01:00' })).toEqual(['apt_a'])
  })

  it('endDate before startDate is 400 even when they differ by less than a millisecond', async () => {
    const response = await app.inject({
      url: '/api/public/v1/appointments?startDate=2025-01-01T00:00:00.0005Z&endDate=2025-01-01T00:00:00.0001Z',
      headers: bearer(key),
    })
    expect(response.statusCode).toBe(400)
    expect(response.json().message).toBe('endDate: endDate must not be before startDate')
  })

  it('9 fractional digits are accepted; 10 or 140 are 400 naming the parameter', async () => {
    for (const name of ['startDate', 'endDate']) {
      expect(await ids({ [name]: '2025-01-01T00:00:00.123456789Z' })).toBeDefined()
      for (const digits of [10, 140]) {
        const response = await app.inject({
          url: `/api/public/v1/appointments?${name}=2025-01-01T00:00:00.${'1'.repeat(digits)}Z`,
          headers: bearer(key),
        })
        expect(response.statusCode, `${name} with ${digits} digits`).toBe(400)
        expect(response.json()).toMatchObject({
          error: 'Invalid query parameters',
          code: 'invalid_query',
          message: `${name}: ${name} must have at most 9 fractional-second digits`,
        })
      }
    }
  })
})
