import { describe, expect, it } from 'vitest'
import { executeText, inlineText, prepareText } from '../../src/store/one-trip.js'
import { KEY_ORGANIZATION } from '../../src/store/types.js'

describe('the one-trip message (store/one-trip.ts)', () => {
  it('binds the key organization from the setting the lookup made', () => {
    expect(executeText('s', [KEY_ORGANIZATION, 50, 0])).toBe(
      "EXECUTE s(current_setting('openbook.org_id', true), 50, 0)",
    )
  })

  it('quotes strings, doubling quotes and backslashes (E-string when there are backslashes)', () => {
    expect(executeText('s', ["o'brien", 'a\\b', "'); DROP TABLE customers; --"])).toBe(
      "EXECUTE s('o''brien',  E'a\\\\b', '''); DROP TABLE customers; --')",
    )
  })

  it('writes NULL for a missing value and numbers as they are', () => {
    expect(executeText('s', [null, undefined, 7, -1.5])).toBe('EXECUTE s(NULL, NULL, 7, -1.5)')
  })

  it('refuses what it cannot write exactly: NUL, non-finite numbers, other kinds', () => {
    expect(() => executeText('s', ['a\0b'])).toThrow(/NUL/)
    expect(() => executeText('s', [Number.NaN])).toThrow()
    expect(() => executeText('s', [Number.POSITIVE_INFINITY])).toThrow()
    expect(() => executeText('s', [{ a: 1 }])).toThrow(/object/)
    expect(() => executeText('s', [10n])).toThrow(/bigint/)
  })

  it('executes a statement without parameters without parentheses, which PostgreSQL refuses empty', () => {
    expect(executeText('s', [])).toBe('EXECUTE s')
  })

  it('writes parameters into a statement that goes unprepared, as EXECUTE does, $10 not read as $1', () => {
    const params = ["o'k", 2, 3, 4, 5, 6, 7, 8, 9, 'ten']
    expect(inlineText('SELECT $1::text, $2, $10', params)).toBe("SELECT 'o''k'::text, 2, 'ten'")
    expect(inlineText('SELECT $1', [KEY_ORGANIZATION])).toBe(
      "SELECT current_setting('openbook.org_id', true)",
    )
    expect(() => inlineText('SELECT $2', [1])).toThrow(/\$2 of 1/)
    expect(() => inlineText('SELECT $1', ['a\0b'])).toThrow(/NUL/)
  })

  it('prepares with the types left to PostgreSQL', () => {
    expect(prepareText('s', 'SELECT $1::int')).toBe('PREPARE s AS SELECT $1::int')
  })
})
