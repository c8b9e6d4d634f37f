import type { PageSql } from './page-statement.js'

// The page's rows decoded: PostgreSQL's text of a timestamp made ISO, and the rows form's
// columns made items' JSON.

/**
 * A timestamptz as PostgreSQL writes it in UTC with DateStyle ISO ('2026-03-02 10:00:00.12+00',
 * the fraction's trailing zeros left out) in the form to_char writes it in the JSON form
 * (`iso`): Date#toISOString's for years 1 to 9999, milliseconds with the rest of the
 * microseconds cut. The usual shape is read by position (190 against a regular expression's
 * 340 ns, 200 times a page); a year past 9999 or BC (an imported offset can move 9999-12-31 or 0001-01-01
 * across) is written as to_char writes it. Any other shape means the transaction's settings did
 * not apply, and is refused rather than guessed at.
 */
export function isoFromPostgres(text: string): string {
  const end = text.length - 3
  if (text.charCodeAt(4) === 45 && text.charCodeAt(10) === 32 && text.endsWith('+00')) {
    if (end === 19) return `${text.slice(0, 10)}T${text.slice(11, 19)}.000Z`
    if (end > 20 && end <= 26 && text.charCodeAt(19) === 46)
      return `${text.slice(0, 10)}T${text.slice(11, 19)}.${milliseconds(text.slice(20, end))}Z`
  }
  const unusual = UNUSUAL_TIMESTAMP.exec(text)
  if (!unusual) throw new Error(`not a UTC timestamp in DateStyle ISO: ${text}`)
  const [, date, time, fraction = ''] = unusual
  return `${date}T${time}.${milliseconds(fraction)}Z`
}

/** Any year of four digits or more, AD or BC (to_char's YYYY leaves the era out). */
const UNUSUAL_TIMESTAMP = /^(\d{4,}-\d\d-\d\d) (\d\d:\d\d:\d\d)(?:\.(\d{1,6}))?\+00(?: BC)?$/

/** A fraction of a second's digits (1 to 6) as milliseconds, the rest cut. */
const milliseconds = (digits: string) => (digits.length >= 3 ? digits.slice(0, 3) : digits.padEnd(3, '0'))

/**
 * The rows as items' JSON, comma-separated: each row's columns are its fields in the item's order
 * and then `total`. JSON.stringify leaves out a property whose value is undefined, so `total` and
 * the NULLs to leave out are set to undefined in place: no copy of a row, one call for the page.
 * Setting a value (never deleting a key) keeps the rows in V8's fast mode for the serializer.
 */
export function itemsJson(rows: Record<string, unknown>[], statement: PageSql): string {
  if (rows.length === 0) return ''
  for (const row of rows) {
    row.total = undefined
    row.version = undefined
    row.latest = undefined
    row.org = undefined
    for (const key of statement.omittedWhenNull) if (row[key] === null) row[key] = undefined
    for (const key of statement.timestamps) {
      const value = row[key]
      if (typeof value === 'string') row[key] = isoFromPostgres(value)
    }
  }
  // '[…]' without its brackets.
  return JSON.stringify(rows).slice(1, -1)
}
