import { describe, expect, it } from 'vitest'
import { appointmentsQuery } from '../../src/routes/public/v1/appointments.js'
import { dateTimeParam } from '../../src/schemas/query.js'

/** What a date-time parameter accepts (RFC 3339 with Z or an offset, a real calendar date, …). */
const ACCEPTED = [
  '2026-07-29T10:41:03.588Z',
  '2026-07-29T10:41:03Z',
  '2026-07-29T10:41:03.123456789Z',
  '2026-07-29T10:41:03.1+01:00',
  '2026-07-29T10:41:03-15:59',
  '2026-07-29T10:41:03+1530',
  '2024-02-29T00:00:00Z',
  '2000-02-29T23:59:59.999Z',
  '0001-01-01T00:00:00Z',
  '9999-12-31T23:59:59.999999Z',
  // Zod 3's pattern takes a time without seconds (RFC 3339 does not): as published since 1.0.0.
  '2026-07-29T10:41Z',
]
const REFUSED = [
  '2026-07-29T10:41:03.1234567890Z',
  '2026-02-30T00:00:00Z',
  '2026-02-29T00:00:00Z',
  '1900-02-29T00:00:00Z',
  '0000-01-01T00:00:00Z',
  '2026-07-29T10:41:03+16:00',
  '2026-07-29T10:41:03+15:60',
  '2026-07-29T10:41:03+99:00',
  '2026-07-29T25:00:00Z',
  '2026-13-01T00:00:00Z',
  '2026-07-29T10:41:03',
  '2026-07-29T10:41:03.Z',
  '2026-07-29t10:41:03z',
  '2026-07-29',
  ' 2026-07-29T10:41:03Z',
  '2026-07-29T10:41:03Z ',
  '',
  'now',
]

describe('a date-time parameter', () => {
  const published = dateTimeParam('startDate', 'a bound')

  it.each(ACCEPTED)('accepts %j', (text) => {
    expect(published.safeParse(text).success).toBe(true)
  })

  it.each(REFUSED)('refuses %j', (text) => {
    expect(published.safeParse(text).success).toBe(false)
  })

  it('a query with a refused date-time reports the published schema issues, every one', () => {
    const result = appointmentsQuery.safeParse({
      startDate: '2026-02-30T00:00:00Z',
      endDate: 'soon',
      limit: '0',
    })
    expect(result.success).toBe(false)
    if (result.success) return
    // Zod's pattern knows the days of each month too; the refinements run after a failed check.
    expect(result.error.issues.map((issue) => `${issue.path.join('.')}: ${issue.message}`)).toEqual([
      'limit: limit must be at least 1',
      'startDate: startDate must be an ISO-8601 date-time with Z or an offset',
      'startDate: startDate is not a calendar date',
      'endDate: endDate must be an ISO-8601 date-time with Z or an offset',
      'endDate: endDate is not a calendar date',
    ])
  })

  it('a query whose date-times pass gives the values as sent, brought to the microsecond', () => {
    const result = appointmentsQuery.safeParse({
      startDate: '2026-07-29t10:41:03.1234567z',
      endDate: '2026-07-30T00:00:00+01:00',
    })
    expect(result).toEqual({
      success: true,
      data: {
        page: { limit: 50, offset: 0 },
        filters: {
          status: undefined,
          customerId: undefined,
          staffId: undefined,
          startDate: '2026-07-29T10:41:03.123457Z',
          endDate: '2026-07-30T00:00:00+01:00',
        },
      },
    })
  })
})
