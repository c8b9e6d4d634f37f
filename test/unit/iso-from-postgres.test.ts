import { describe, expect, it } from 'vitest'
import { isoFromPostgres } from '../../src/queries/page-rows.js'

describe("a timestamptz's text in UTC and DateStyle ISO, written as Date#toISOString does", () => {
  it('keeps milliseconds and cuts the rest of the microseconds, as to_char(…, MS) does', () => {
    expect(isoFromPostgres('2026-03-02 10:00:00+00')).toBe('2026-03-02T10:00:00.000Z')
    expect(isoFromPostgres('2026-03-02 10:00:00.1+00')).toBe('2026-03-02T10:00:00.100Z')
    expect(isoFromPostgres('2026-03-02 10:00:00.12+00')).toBe('2026-03-02T10:00:00.120Z')
    expect(isoFromPostgres('2026-03-02 10:00:00.123+00')).toBe('2026-03-02T10:00:00.123Z')
    expect(isoFromPostgres('2026-03-02 10:00:00.1239+00')).toBe('2026-03-02T10:00:00.123Z')
    expect(isoFromPostgres('1999-12-31 23:59:59.999999+00')).toBe('1999-12-31T23:59:59.999Z')
  })

  it('agrees with Date#toISOString for any millisecond', () => {
    for (let ms = -2e12; ms < 4e12; ms += 7_919_123_457) {
      const iso = new Date(ms).toISOString()
      const text = `${iso.slice(0, 10)} ${iso.slice(11, 23).replace(/\.?0+$/, '')}+00`
      expect(isoFromPostgres(text)).toBe(iso)
    }
  })

  it('writes a year past 9999 or BC as to_char writes it (YYYY leaves the era out)', () => {
    // What PostgreSQL writes for 9999-12-31T23:59:59.5-15:00 and 0001-01-01T00:00:00+01:00.
    expect(isoFromPostgres('10000-01-01 14:59:59.5+00')).toBe('10000-01-01T14:59:59.500Z')
    expect(isoFromPostgres('0001-12-31 23:00:00+00 BC')).toBe('0001-12-31T23:00:00.000Z')
    expect(isoFromPostgres('0001-12-31 23:00:00.123456+00 BC')).toBe('0001-12-31T23:00:00.123Z')
  })

  it('refuses another zone, DateStyle or shape rather than guess', () => {
    for (const text of [
      '2026-03-02 10:00:00+01',
      '2026-03-02T10:00:00+00',
      '03/02/2026 10:00:00 UTC',
      'Mon Mar 02 10:00:00 2026 UTC',
      '2026-03-02 10:00:00.+00',
      '2026-03-02 10:00:00.1234567+00',
      'infinity',
      '10000-01-01 00:00:00+01',
    ]) {
      expect(() => isoFromPostgres(text), text).toThrow(/not a UTC timestamp/)
    }
  })
})
