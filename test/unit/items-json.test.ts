import fc from 'fast-check'
import { describe, expect, it } from 'vitest'
import { appointmentsPage } from '../../src/queries/appointments.js'
import { customersPage } from '../../src/queries/customers.js'
import { itemsJson } from '../../src/queries/page-rows.js'
import type { PageSql } from '../../src/queries/page-statement.js'

// The rows form's items are written member by member (page-rows.ts): they must be the bytes that
// JSON.stringify gives for the same item, whatever the text holds. The same bytes as the database's
// own JSON, on both stores: test/api/page-forms.test.ts.

/** The page's scalars, which every row carries as columns after the item's (NULL past the first). */
const SCALARS = { total: null, version: null, latest: null, org: null }

/** What the item is, by the rule: a NULL column left out unless written as null, a timestamp made ISO. */
function expectedItem(row: Record<string, unknown>, statement: PageSql): Record<string, unknown> {
  const item: Record<string, unknown> = {}
  for (const column of statement.itemColumns) {
    const value = row[column.key]
    if (value === null) {
      if (column.nullable) item[column.key] = null
    } else
      item[column.key] = column.timestamp ? `${String(value).replace(' ', 'T').slice(0, 19)}.000Z` : value
  }
  return item
}

/** A row as pg hands it: every column, in the statement's order, then the scalars. */
const rowOf = (statement: PageSql, values: (column: string, timestamp: boolean) => unknown) => ({
  ...Object.fromEntries(statement.itemColumns.map(({ key, timestamp }) => [key, values(key, timestamp)])),
  ...SCALARS,
})

const STATEMENTS: [string, PageSql][] = [
  ['customers', customersPage('org_x')],
  ['appointments', appointmentsPage('org_x', {})],
]

describe("a page's rows written as its items' JSON", () => {
  it.each(STATEMENTS)('%s: any text, as JSON.stringify writes it', (_name, statement) => {
    const text = fc.oneof(
      fc.string({ unit: 'binary' }),
      // Lone surrogates, quotes, backslashes and controls beside plain text.
      fc.string({
        unit: fc.constantFrom(
          'a',
          'é',
          '"',
          '\\',
          '\n',
          '\u0000',
          '\u001f',
          '\ud800',
          '\udc00',
          '😀',
          '\u2028',
        ),
      }),
      fc.constant(null),
    )
    fc.assert(
      fc.property(fc.array(fc.array(text, { minLength: 40, maxLength: 40 }), { maxLength: 4 }), (values) => {
        const rows = values.map((rowValues) =>
          rowOf(statement, (key, timestamp) => {
            if (key === 'id') return 'x_1'
            if (timestamp) return '2026-03-02 10:00:00+00'
            return rowValues[statement.itemColumns.findIndex((column) => column.key === key)] ?? null
          }),
        )
        const expected = rows.map((row) => JSON.stringify(expectedItem(row, statement))).join(',')
        expect(itemsJson(rows, statement)).toBe(expected)
      }),
      { numRuns: 300 },
    )
  })

  it('writes numbers and booleans bare, a NULL written as null, and leaves the other NULLs out', () => {
    const statement = appointmentsPage('org_x', {})
    const row = rowOf(statement, (key, timestamp) => {
      if (timestamp) return '2026-03-02 10:00:00.123456+00'
      if (key === 'id') return 'apt_1'
      if (key === 'priceCents') return 4500
      if (key === 'requiresPayment') return false
      return null
    })
    const item = JSON.parse(itemsJson([row], statement))
    expect(item).toMatchObject({ id: 'apt_1', priceCents: 4500, requiresPayment: false, note: null })
    expect(item.start).toBe('2026-03-02T10:00:00.123Z')
    expect(Object.keys(item)).not.toContain('customerId')
    // Keys in the item's order, each once.
    const keys = statement.itemColumns.map((column) => column.key).filter((key) => key in item)
    expect(Object.keys(item)).toEqual(keys)
  })

  it('writes each row as one item, in order, comma-separated', () => {
    const statement = customersPage('org_x')
    const rows = ['cus_1', 'cus_2', 'cus_3'].map((id) =>
      rowOf(statement, (key, timestamp) => (key === 'id' ? id : timestamp ? '2026-03-02 10:00:00+00' : null)),
    )
    expect(JSON.parse(`[${itemsJson(rows, statement)}]`).map((item: { id: string }) => item.id)).toEqual([
      'cus_1',
      'cus_2',
      'cus_3',
    ])
    expect(itemsJson([], statement)).toBe('')
  })
})
