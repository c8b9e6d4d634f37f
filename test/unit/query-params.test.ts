import { describe, expect, it } from 'vitest'
import { z } from 'zod'
import { appointmentsQuery } from '../../src/routes/public/v1/appointments.js'
import { LIST_ROUTES } from '../../src/routes/public/v1/index.js'
import { epochNanoseconds, paginationQuery, type Query, toMicroseconds } from '../../src/schemas/query.js'

/** The lists' queries, one parameter at a time: what the routes accept, refuse and pass on to SQL. */
function parser<Out>(query: Query<Out>, name: string, pick: (data: Out) => unknown) {
  return (value: unknown) => {
    const result = query.safeParse(value === undefined ? {} : { [name]: value })
    return result.success ? pick(result.data) : 'refused'
  }
}
const limit = parser(paginationQuery, 'limit', (data) => data.limit)
const offset = parser(paginationQuery, 'offset', (data) => data.offset)
const filter = (name: 'customerId' | 'startDate') =>
  parser(appointmentsQuery, name, (data) => data.filters[name])

describe('limit and offset', () => {
  it('limit: decimal 1 to 100, 50 when absent; anything else refused', () => {
    expect(limit(undefined)).toBe(50)
    expect(limit('1')).toBe(1)
    expect(limit('100')).toBe(100)
    expect(limit('007')).toBe(7)
    for (const bad of ['0', '101', '-1', '1.5', '1e2', '0x10', ' 5', 'abc', '', ['1', '2']]) {
      expect(limit(bad), JSON.stringify(bad)).toBe('refused')
    }
  })

  it('offset: decimal from 0, where empty and null mean 0', () => {
    expect(offset(undefined)).toBe(0)
    expect(offset('')).toBe(0)
    expect(offset('null')).toBe(0)
    expect(offset('25')).toBe(25)
    expect(offset(String(Number.MAX_SAFE_INTEGER))).toBe(Number.MAX_SAFE_INTEGER)
    for (const bad of ['-1', '1.5', '9007199254740992', 'x', ['0', '1']]) {
      expect(offset(bad), JSON.stringify(bad)).toBe('refused')
    }
  })

  it('the messages name the parameter and its bound', () => {
    const issue = (value: unknown) => {
      const result = paginationQuery.safeParse({ limit: value })
      return result.success ? undefined : result.error.issues[0]?.message
    }
    expect(issue('0')).toBe('limit must be at least 1')
    expect(issue('101')).toBe('limit must be at most 100')
    expect(issue('x')).toBe('limit must be a decimal integer, given once')
  })
})

describe('ids', () => {
  const customerId = filter('customerId')

  it('printable text of 1 to 128 characters, given once', () => {
    expect(customerId(undefined)).toBeUndefined()
    expect(customerId('cus_1')).toBe('cus_1')
    expect(customerId('x'.repeat(128))).toBe('x'.repeat(128))
    for (const bad of ['', 'x'.repeat(129), 'a\u0000b', 'line\nbreak', ['a', 'b']]) {
      expect(customerId(bad), JSON.stringify(bad)).toBe('refused')
    }
  })
})

describe('date-times', () => {
  const startDate = filter('startDate')

  it('RFC 3339 with Z or an offset, a calendar date, at most nine fraction digits; t and z in any case', () => {
    for (const good of [
      '2025-01-01T00:00:00Z',
      '2025-01-01T00:00:00.123456789Z',
      '2024-02-29T12:00:00+14:00',
      '2025-06-30T23:59:59-12:00',
    ]) {
      expect(startDate(good), good).toBe(toMicroseconds(good, 'up'))
    }
    expect(startDate('2025-01-01t00:00:00z')).toBe('2025-01-01T00:00:00Z')
    for (const bad of [
      '2025-01-01',
      '2025-01-01T00:00:00',
      '2025-02-30T00:00:00Z',
      '2023-02-29T00:00:00Z',
      '2025-13-01T00:00:00Z',
      '2025-01-01T00:00:00+16:00',
      '2025-01-01T00:00:00.1234567890Z',
      'yesterday',
    ]) {
      expect(startDate(bad), bad).toBe('refused')
    }
  })

  it('to the microsecond: up for a lower bound, down for an upper one, only past six digits', () => {
    expect(toMicroseconds('2025-01-01T00:00:00.1234561Z', 'up')).toBe('2025-01-01T00:00:00.123457Z')
    expect(toMicroseconds('2025-01-01T00:00:00.1234569Z', 'down')).toBe('2025-01-01T00:00:00.123456Z')
    expect(toMicroseconds('2025-01-01T00:00:00.123456000Z', 'up')).toBe('2025-01-01T00:00:00.123456Z')
    expect(toMicroseconds('2025-01-01T00:00:00.123Z', 'up')).toBe('2025-01-01T00:00:00.123Z')
    expect(toMicroseconds('2025-01-01T00:00:00Z', 'down')).toBe('2025-01-01T00:00:00Z')
    // Up from .999999…: the next second, across midnight and the year, the offset kept.
    expect(toMicroseconds('2025-12-31T23:59:59.9999991+02:00', 'up')).toBe('2026-01-01T00:00:00.000000+02:00')
    // Past the last representable second the bound stays on it.
    expect(toMicroseconds('9999-12-31T23:59:59.9999999Z', 'up')).toBe('9999-12-31T23:59:59.999999Z')
  })

  it('compares two instants exactly, to the nanosecond, across offsets', () => {
    expect(epochNanoseconds('1970-01-01T00:00:00.000000001Z')).toBe(1n)
    expect(epochNanoseconds('2025-01-01T01:00:00+01:00')).toBe(epochNanoseconds('2025-01-01T00:00:00Z'))
    expect(epochNanoseconds('not a date')).toBeUndefined()
  })
})

describe('the appointments query', () => {
  const issues = (query: Record<string, unknown>) => {
    const result = appointmentsQuery.safeParse(query)
    return result.success ? [] : result.error.issues.map((issue) => [issue.path, issue.message])
  }

  it('refuses an end before the start, to the nanosecond, and not two bounds within one microsecond', () => {
    const query = (startDate: string, endDate: string) => appointmentsQuery.safeParse({ startDate, endDate })
    expect(
      issues({ startDate: '2025-01-01T00:00:00.000000002Z', endDate: '2025-01-01T00:00:00.000000001Z' }),
    ).toEqual([[['endDate'], 'endDate must not be before startDate']])
    // The same microsecond: accepted, and rounded so that no start time can match both ways.
    const sameMicrosecond = query('2025-01-01T00:00:00.0000001Z', '2025-01-01T00:00:00.0000009Z')
    expect(sameMicrosecond.success && sameMicrosecond.data.filters).toMatchObject({
      startDate: '2025-01-01T00:00:00.000001Z',
      endDate: '2025-01-01T00:00:00.000000Z',
    })
  })

  it('checks the bounds together only once every parameter is valid on its own', () => {
    const reversed = { startDate: '2025-02-01T00:00:00Z', endDate: '2025-01-01T00:00:00Z' }
    expect(issues({ ...reversed, limit: '0' })).toEqual([[['limit'], 'limit must be at least 1']])
    expect(issues({ ...reversed, offset: '-1' })).toEqual([[['offset'], 'offset must be at least 0']])
    expect(issues({ ...reversed, status: 'done' })).toHaveLength(1)
    expect(issues(reversed)).toEqual([[['endDate'], 'endDate must not be before startDate']])
  })

  it('reports every invalid parameter, in the order of the schema', () => {
    const paths = issues({ endDate: 'x', limit: '0', staffId: '', offset: 'y' }).map(([path]) => String(path))
    expect([...new Set(paths)]).toEqual(['limit', 'offset', 'staffId', 'endDate'])
  })

  it('takes one of the statuses, with the defaults of limit and offset, and refuses other names', () => {
    const result = appointmentsQuery.safeParse({ status: 'completed' })
    expect(result.success && result.data).toEqual({
      page: { limit: 50, offset: 0 },
      filters: { status: 'completed' },
    })
    // A name the contract does not define is refused, not ignored: a guessed filter would
    // otherwise return the whole list.
    const other = appointmentsQuery.safeParse({ status: 'completed', other: 'x' })
    expect(other.success).toBe(false)
    expect(JSON.stringify(other.success ? null : other.error.issues)).toContain('other')
    expect(appointmentsQuery.safeParse({ status: 'done' }).success).toBe(false)
    expect(appointmentsQuery.safeParse({ status: ['completed', 'cancelled'] }).success).toBe(false)
  })
})

describe('the request path parses plain schemas', () => {
  /** The effects of a schema and of everything it wraps: Zod 3's preprocess, transform and refinement. */
  function effects(schema: z.ZodTypeAny): string[] {
    if (schema instanceof z.ZodObject) return Object.values(schema.shape as z.ZodRawShape).flatMap(effects)
    if (schema instanceof z.ZodEffects) return [schema._def.effect.type, ...effects(schema.innerType())]
    if (schema instanceof z.ZodOptional || schema instanceof z.ZodNullable) return effects(schema.unwrap())
    if (schema instanceof z.ZodDefault) return effects(schema.removeDefault())
    return []
  }

  it('no parameter preprocesses or transforms (each costs several times a plain parse in Zod 3)', () => {
    for (const route of LIST_ROUTES) {
      expect(
        effects(route.query.schema).filter((type) => type !== 'refinement'),
        route.path,
      ).toEqual([])
    }
    // The walk sees effects where there are some: the date-times' calendar checks are refinements.
    expect(effects(appointmentsQuery.schema)).toContain('refinement')
    expect(effects(z.object({ n: z.preprocess(Number, z.number()) }))).toEqual(['preprocess'])
  })
})
