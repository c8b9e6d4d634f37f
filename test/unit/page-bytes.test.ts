import fc from 'fast-check'
import pg from 'pg'
import { Parser } from 'pg-protocol/dist/parser.js'
import { describe, expect, it } from 'vitest'
import { appointmentsPage } from '../../src/queries/appointments.js'
import { customersPage } from '../../src/queries/customers.js'
import { pageBody } from '../../src/queries/page.js'
import { PageBytesWriter, type ResultField } from '../../src/queries/page-bytes.js'
import { itemsJson } from '../../src/queries/page-rows.js'
import type { PageSql } from '../../src/queries/page-statement.js'
import {
  APPOINTMENT,
  CUSTOMER,
  itemFields,
  type ResourceDescription,
} from '../../src/schemas/descriptions.js'

// The rows form's items written from the DataRow messages' bytes (page-bytes.ts) are the bytes
// that pg's rows written by `itemsJson` give, whatever the rows hold: the writer is held to that
// path, run on the same messages through pg's own parser and result builder. On a real
// connection, through the store: test/store/row-tap.test.ts and test/api/page-forms.test.ts.

const BOOL = 16
const INT4 = 23
const TEXT = 25
/** An enum's type, as a database gives it: pg has no parser for it, so it is text. */
const ENUM = 16_500

/** A column of a page's result, and how its values are made. */
interface Column {
  readonly field: ResultField
  readonly kind: 'text' | 'boolean' | 'integer' | 'timestamp' | 'scalar'
}

function columnsOf(resource: ResourceDescription, statement: PageSql): Column[] {
  const types = new Map(itemFields(resource).map(({ field, type }) => [field, type]))
  const items = statement.columns.map((name): Column => {
    const type = types.get(name)
    if (statement.timestamps.includes(name)) return { field: { name, dataTypeID: TEXT }, kind: 'timestamp' }
    if (type === 'boolean') return { field: { name, dataTypeID: BOOL }, kind: 'boolean' }
    if (type === 'cents') return { field: { name, dataTypeID: INT4 }, kind: 'integer' }
    return { field: { name, dataTypeID: Array.isArray(type) ? ENUM : TEXT }, kind: 'text' }
  })
  const scalars = ['total', 'version', 'latest', 'org'].map(
    (name): Column => ({ field: { name, dataTypeID: name === 'total' ? INT4 : TEXT }, kind: 'scalar' }),
  )
  return [...items, ...scalars]
}

/** One DataRow message of `values` (NULL as null). */
function dataRow(values: readonly (Buffer | null)[]): Buffer {
  const parts = values.map((value) => {
    const length = Buffer.alloc(4)
    length.writeInt32BE(value === null ? -1 : value.length)
    return value === null ? length : Buffer.concat([length, value])
  })
  const count = Buffer.alloc(2)
  count.writeInt16BE(values.length)
  const body = Buffer.concat([count, ...parts])
  const head = Buffer.alloc(5)
  head[0] = 0x44
  head.writeInt32BE(body.length + 4, 1)
  return Buffer.concat([head, body])
}

/** The messages as pg reads them: each field a string, each row made by pg's `Result`, then `itemsJson`. */
function throughPg(statement: PageSql, columns: readonly Column[], wire: Buffer): string {
  const result = new (pg as unknown as { Result: new () => PgResult }).Result()
  result.addFields(columns.map(({ field }) => ({ ...field, format: 'text' })))
  const rows: Record<string, unknown>[] = []
  new Parser().parse(wire, (message) =>
    rows.push(result.parseRow((message as unknown as { fields: unknown[] }).fields)),
  )
  return rows[0]?.id === null ? '' : itemsJson(rows, statement)
}
interface PgResult {
  addFields(fields: readonly object[]): void
  parseRow(values: unknown[]): Record<string, unknown>
}

/** The messages through the writer, each handed over where it lies in the parser's buffer. */
function throughWriter(statement: PageSql, columns: readonly Column[], wire: Buffer) {
  const writer = new PageBytesWriter(statement)
  expect(writer.accepts(columns.map(({ field }) => field))).toBe(true)
  const parser = new Parser() as unknown as {
    parse(buffer: Buffer, callback: () => void): void
    handlePacket(offset: number, code: number, length: number, bytes: Buffer): unknown
  }
  parser.handlePacket = (offset, _code, length, bytes) => writer.row(bytes, offset, length)
  // In two pieces, so that a message is read across the parser's buffers.
  const cut = Math.floor(wire.length / 3)
  parser.parse(wire.subarray(0, cut), () => undefined)
  parser.parse(wire.subarray(cut), () => undefined)
  return writer.finish()
}

const customers = customersPage('org_x')
const appointments = appointmentsPage('org_x', {})
const PAGES = [
  ['customers', customers, columnsOf(CUSTOMER, customers)],
  ['appointments', appointments, columnsOf(APPOINTMENT, appointments)],
] as const

/** Text of any bytes: mostly UTF-8 with what JSON escapes, sometimes bytes that are not UTF-8. */
const textBytes = fc.oneof(
  fc
    .string({
      unit: fc.oneof(
        fc.constantFrom('a', 'é', '"', '\\', '/', '\n', '\r', '\t', '\b', '\f', '\u0000', '\u001f', '\u007f'),
        fc.constantFrom('😀', '\u2028', 'Zoë', '漢'),
        fc.string({ unit: 'grapheme', maxLength: 3 }),
      ),
    })
    .map((text) => Buffer.from(text)),
  fc.uint8Array({ maxLength: 12 }).map((bytes) => Buffer.from(bytes)),
)
/** A timestamptz as PostgreSQL writes it in UTC and DateStyle ISO: any fraction, years past 9999, BC. */
const timestamp = fc
  .tuple(
    fc.constantFrom('2026-03-02', '1999-12-31', '0001-01-01', '10000-01-01'),
    fc.constantFrom('', '.1', '.12', '.123', '.1234', '.12345', '.123456', '.5', '.05'),
    fc.constantFrom('', ' BC'),
  )
  .map(([date, fraction, era]) => Buffer.from(`${date} 10:20:30${fraction}+00${era}`))

function valuesOf(column: Column, first: boolean): fc.Arbitrary<Buffer | null> {
  const maybe = (value: fc.Arbitrary<Buffer>) => fc.option(value, { nil: null, freq: 4 })
  switch (column.kind) {
    case 'scalar':
      return fc.constant(
        first ? Buffer.from(column.field.name === 'total' ? '38114' : `${column.field.name}_1`) : null,
      )
    case 'boolean':
      return maybe(fc.constantFrom('t', 'f').map((value) => Buffer.from(value)))
    case 'integer':
      return maybe(fc.integer().map((value) => Buffer.from(String(value))))
    case 'timestamp':
      return maybe(timestamp)
    default:
      return column.field.name === 'id' ? textBytes.filter((id) => id.length > 0) : maybe(textBytes)
  }
}

const rowsOf = (columns: readonly Column[]) =>
  fc.array(fc.tuple(...columns.map((column) => valuesOf(column, false))), { minLength: 0, maxLength: 6 })

describe("a page's items written from its rows' bytes", () => {
  it.each(PAGES)(
    '%s: the bytes pg and itemsJson write, whatever the rows hold',
    (_name, statement, columns) => {
      fc.assert(
        fc.property(
          fc.tuple(...columns.map((column) => valuesOf(column, true))),
          rowsOf(columns),
          (first, rest) => {
            const wire = Buffer.concat([first, ...rest].map((values) => dataRow(values)))
            const { items, scalars } = throughWriter(statement, columns, wire)
            expect(items.toString('latin1')).toBe(
              Buffer.from(throughPg(statement, columns, wire)).toString('latin1'),
            )
            expect(scalars).toEqual({ total: 38114, version: 'version_1', latest: 'latest_1', org: 'org_1' })
          },
        ),
        { numRuns: 400 },
      )
    },
  )

  it('writes an empty page as no item, with its scalars', () => {
    const columns = columnsOf(CUSTOMER, customers)
    const empty = columns.map(({ field }) =>
      field.name === 'total' ? Buffer.from('0') : field.name === 'version' ? Buffer.from('7') : null,
    )
    empty[columns.findIndex(({ field }) => field.name === 'org')] = Buffer.from('org_x')
    const { items, scalars } = throughWriter(customers, columns, dataRow(empty))
    expect(items.length).toBe(0)
    expect(scalars).toEqual({ total: 0, version: '7', latest: null, org: 'org_x' })
  })

  it('grows past its first buffer', () => {
    const columns = columnsOf(CUSTOMER, customers)
    const row = (i: number) =>
      columns.map(({ field, kind }) =>
        field.name === 'id'
          ? Buffer.from(`cus_${i}`)
          : kind === 'timestamp'
            ? Buffer.from('2026-03-02 10:20:30.5+00')
            : kind === 'scalar'
              ? i === 0
                ? Buffer.from('1')
                : null
              : kind === 'text'
                ? Buffer.from('"'.repeat(400))
                : null,
      )
    const wire = Buffer.concat(Array.from({ length: 100 }, (_, i) => dataRow(row(i))))
    const { items } = throughWriter(customers, columns, wire)
    expect(items.length).toBeGreaterThan(100 * 400 * 2)
    expect(items.toString()).toBe(throughPg(customers, columns, wire))
  })

  it('makes the body around its items where they were written, and in a buffer of its own where the rest does not fit', () => {
    const columns = columnsOf(CUSTOMER, customers)
    const row = (i: number) =>
      columns.map(({ field, kind }) =>
        field.name === 'id'
          ? Buffer.from(`cus_${i}`)
          : kind === 'scalar'
            ? i === 0
              ? Buffer.from(field.name === 'total' ? '3' : `${field.name}_1`)
              : null
            : null,
      )
    const { items, written } = throughWriter(
      customers,
      columns,
      Buffer.concat([0, 1, 2].map((i) => dataRow(row(i)))),
    )
    const pagination = { limit: 3, offset: 0, total: 3, hasMore: false }
    const expected = { data: [{ id: 'cus_0' }, { id: 'cus_1' }, { id: 'cus_2' }], pagination }
    const body = pageBody({ items, pagination, written })
    expect(JSON.parse(body.toString())).toEqual(expected)
    expect(body.buffer, 'the items are not copied').toBe(written.buffer)
    // The items end where their buffer does: the rest goes with a copy.
    const end = items.byteOffset - written.byteOffset + items.length
    const full = Buffer.allocUnsafeSlow(end)
    written.copy(full, 0, 0, end)
    const last = full.subarray(full.length - items.length)
    const copied = pageBody({ items: last, pagination, written: full })
    expect(JSON.parse(copied.toString())).toEqual(expected)
    expect(copied.buffer).not.toBe(full.buffer)
  })

  it('takes only the result of the page statement’s columns', () => {
    const writer = new PageBytesWriter(customers)
    const columns = columnsOf(CUSTOMER, customers).map(({ field }) => field)
    expect(writer.accepts([{ name: 'org_id', dataTypeID: TEXT }])).toBe(false)
    expect(writer.accepts(columns.slice(1))).toBe(false)
    expect(writer.accepts([...columns.slice(0, -1), { name: 'other', dataTypeID: TEXT }])).toBe(false)
    expect(() => writer.finish()).toThrow(/returned no row/)
  })

  it("writes each result by its own columns' types, whatever the same statement's results came with before", () => {
    const columns = columnsOf(CUSTOMER, customers)
    const cityAs = (dataTypeID: number) =>
      columns.map((column) =>
        column.field.name === 'city' ? { ...column, field: { name: 'city', dataTypeID } } : column,
      )
    const wire = dataRow(
      columns.map(({ field }) =>
        field.name === 'id'
          ? Buffer.from('cus_1')
          : field.name === 'city'
            ? Buffer.from('42')
            : field.name === 'version' || field.name === 'org'
              ? Buffer.from('1')
              : null,
      ),
    )
    const city = (dataTypeID: number) =>
      /"city":("42"|42)/.exec(throughWriter(customers, cityAs(dataTypeID), wire).items.toString())?.[1]
    expect(city(TEXT)).toBe('"42"')
    expect(city(INT4)).toBe('42')
    expect(() => city(701)).toThrow(/city is of type 701/)
    expect(city(TEXT)).toBe('"42"')
    expect(city(INT4)).toBe('42')
  })

  it('refuses a column pg would not hand on as text, and a timestamp it cannot read, when it finishes', () => {
    const columns = columnsOf(CUSTOMER, customers)
    const numeric = columns.map((column) =>
      column.field.name === 'city' ? { ...column, field: { name: 'city', dataTypeID: 701 } } : column,
    )
    const values = (createdAt: string) =>
      columns.map(({ field, kind }) =>
        field.name === 'id'
          ? Buffer.from('cus_1')
          : kind === 'timestamp'
            ? Buffer.from(createdAt)
            : field.name === 'version' || field.name === 'org'
              ? Buffer.from('1')
              : null,
      )
    expect(() => throughWriter(customers, numeric, dataRow(values('2026-03-02 10:20:30+00')))).toThrow(
      /city is of type 701/,
    )
    expect(() => throughWriter(customers, columns, dataRow(values('2026-03-02 10:20:30+01')))).toThrow(
      /not a UTC timestamp/,
    )
  })
})
