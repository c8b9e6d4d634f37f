import fc from 'fast-check'
import { describe, expect, it } from 'vitest'
import { appointmentsPage } from '../../src/queries/appointments.js'
import { customersPage } from '../../src/queries/customers.js'
import { itemsJson } from '../../src/queries/page-rows.js'
import { itemFieldsOf, type PageSql } from '../../src/queries/page-statement.js'
import { APPOINTMENT, CUSTOMER } from '../../src/schemas/descriptions.js'

// The rows form's items (page-rows.ts): each row's item fields in order, a NULL left out unless the
// field is written as null, a timestamp made ISO, the page's scalars left out, and the text as
// JSON.stringify writes it. The same bytes as the database's own JSON, on both stores:
// test/api/page-forms.test.ts.

/** The page's scalars, which every row carries as columns after the item's (NULL past the first). */
const SCALARS = { total: null, version: null, latest: null, org: null }

/** A page's item columns in order, as the statement says to write them. */
interface Column {
  readonly key: string
  readonly nullable: boolean
  readonly timestamp: boolean
}

function columnsOf(statement: PageSql, keys: readonly string[]): Column[] {
  return keys.map((key) => ({
    key,
    nullable: !statement.omittedWhenNull.includes(key),
    timestamp: statement.timestamps.includes(key),
  }))
}

/** What the item is, by the rule: a NULL column left out unless written as null, a timestamp made ISO. */
function expectedItem(row: Record<string, unknown>, columns: readonly Column[]): Record<string, unknown> {
  const item: Record<string, unknown> = {}
  for (const column of columns) {
    const value = row[column.key]
    if (value === null) {
      if (column.nullable) item[column.key] = null
    } else
      item[column.key] = column.timestamp ? `${String(value).replace(' ', 'T').slice(0, 19)}.000Z` : value
  }
  return item
}

/** A row as pg hands it: every column, in the statement's order, then the scalars. */
function rowOf(columns: readonly Column[], value: (key: string, timestamp: boolean) => unknown) {
  return {
    ...Object.fromEntries(columns.map(({ key, timestamp }) => [key, value(key, timestamp)])),
    ...SCALARS,
  }
}

const customers = customersPage('org_x')
const appointments = appointmentsPage('org_x', {})
const customerColumns = columnsOf(
  customers,
  itemFieldsOf(CUSTOMER).map(({ key }) => key),
)
const appointmentColumns = columnsOf(
  appointments,
  itemFieldsOf(APPOINTMENT).map(({ key }) => key),
)

describe("a page's rows written as its items' JSON", () => {
  it.each([
    ['customers', customers, customerColumns],
    ['appointments', appointments, appointmentColumns],
  ] as const)('%s: any text, as JSON.stringify writes it', (_name, statement, columns) => {
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
          rowOf(columns, (key, timestamp) => {
            if (key === 'id') return 'x_1'
            if (timestamp) return '2026-03-02 10:00:00+00'
            return rowValues[columns.findIndex((column) => column.key === key)] ?? null
          }),
        )
        const expected = rows.map((row) => JSON.stringify(expectedItem(row, columns))).join(',')
        expect(itemsJson(rows, statement)).toBe(expected)
      }),
      { numRuns: 300 },
    )
  })

  it('writes numbers and booleans bare, a NULL written as null, and leaves the other NULLs out', () => {
    const row = rowOf(appointmentColumns, (key, timestamp) => {
      if (timestamp) return '2026-03-02 10:00:00.123456+00'
      if (key === 'id') return 'apt_1'
      if (key === 'priceCents') return 4500
      if (key === 'requiresPayment') return false
      return null
    })
    const item = JSON.parse(itemsJson([row], appointments))
    expect(item).toMatchObject({ id: 'apt_1', priceCents: 4500, requiresPayment: false, note: null })
    expect(item.start).toBe('2026-03-02T10:00:00.123Z')
    expect(Object.keys(item)).not.toContain('customerId')
    // Keys in the item's order, each once, and none of the page's scalars.
    const keys = appointmentColumns.map((column) => column.key).filter((key) => key in item)
    expect(Object.keys(item)).toEqual(keys)
  })

  it('writes each row as one item, in order, comma-separated', () => {
    const rows = ['cus_1', 'cus_2', 'cus_3'].map((id) =>
      rowOf(customerColumns, (key, timestamp) =>
        key === 'id' ? id : timestamp ? '2026-03-02 10:00:00+00' : null,
      ),
    )
    const items = JSON.parse(`[${itemsJson(rows, customers)}]`) as { id: string }[]
    expect(items.map((item) => item.id)).toEqual(['cus_1', 'cus_2', 'cus_3'])
    expect(itemsJson([], customers)).toBe('')
  })
})
