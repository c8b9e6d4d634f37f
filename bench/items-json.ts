/**
 * Node's cost of a page's rows in one process: pg making the rows of a real page (the largest
 * organization's, read once as PostgreSQL's text), `itemsJson` writing them as items (the NULLs set
 * to undefined in place, one JSON.stringify of the rows), and a writer that was weighed and not
 * kept: member by member, each row's columns in the item's order, a string quoted as it is unless
 * a character needs escaping. Each answer is made bytes (`Buffer.from`), as the server must before
 * it hashes, compresses or sends it: a string built by appending is a rope, and its bytes cost
 * what the appending saved. Then from the DataRow messages themselves, as the connection reads
 * them: pg-protocol's parser, pg's rows and `itemsJson`, against the items written from the
 * messages' bytes (`PageBytesWriter`, which the server uses). Interleaved batches, median and
 * quartiles; all write the same bytes (checked).
 *
 *   node --import tsx bench/items-json.ts [DATABASE_URL] [--batches 40]
 */
import { parseArgs } from 'node:util'
import pg from 'pg'
import { Parser } from 'pg-protocol/dist/parser.js'
import { appointmentsPage } from '../src/queries/appointments.js'
import { customersPage } from '../src/queries/customers.js'
import { PageBytesWriter } from '../src/queries/page-bytes.js'
import { isoFromPostgres, itemsJson } from '../src/queries/page-rows.js'
import {
  type ItemField,
  itemFieldsOf,
  type PageStatement,
  pageParams,
  rowsTextFor,
} from '../src/queries/page-statement.js'
import { APPOINTMENT, CUSTOMER } from '../src/schemas/descriptions.js'
import { READER_SETTINGS } from './sql.js'

const { values, positionals } = parseArgs({
  options: { batches: { type: 'string', default: '40' } },
  allowPositionals: true,
})
const url = positionals[0] ?? 'postgres://root@127.0.0.1:5432/openbook_bench_100k'

/** A column as the member-by-member writer writes it. */
interface Column {
  readonly key: string
  readonly name: string
  readonly member: string
  readonly nullable: boolean
  readonly timestamp: boolean
}

const columnsOf = (fields: readonly ItemField[]): readonly Column[] =>
  fields.map(({ key, nullable, rows }) => ({
    key,
    name: `"${key}":`,
    member: `,"${key}":`,
    nullable: nullable === true,
    timestamp: rows?.timestamp === true,
  }))

// biome-ignore lint/suspicious/noControlCharactersInRegex: the control characters are what it finds
const NEEDS_ESCAPE = /["\\\u0000-\u001f\ud800-\udfff]/

function jsonValue(value: unknown): string {
  if (typeof value === 'string') return NEEDS_ESCAPE.test(value) ? JSON.stringify(value) : `"${value}"`
  return typeof value === 'number' || typeof value === 'boolean' ? String(value) : JSON.stringify(value)
}

/** The writer weighed: the items member by member, appended to and never sliced. */
function itemsByMembers(rows: readonly Record<string, unknown>[], columns: readonly Column[]): string {
  let items = ''
  for (let i = 0; i < rows.length; i++) {
    const row = rows[i] as Record<string, unknown>
    let item = i === 0 ? '{' : ',{'
    let first = true
    for (const column of columns) {
      const value = row[column.key]
      let json: string
      if (value === null || value === undefined) {
        if (!column.nullable) continue
        json = 'null'
      } else {
        json =
          column.timestamp && typeof value === 'string' ? `"${isoFromPostgres(value)}"` : jsonValue(value)
      }
      item += (first ? column.name : column.member) + json
      first = false
    }
    items += `${item}}`
  }
  return items
}

/** A result as PostgreSQL sent it: its fields and each row's text, for pg to parse again and again. */
interface Raw {
  readonly fields: pg.FieldDef[]
  readonly rows: (string | null)[][]
}

const client = new pg.Client({ connectionString: url })
await client.connect()
const raw = new Map<string, { statement: PageStatement; columns: readonly Column[]; raw: Raw }>()
try {
  const [largest] = (
    await client.query<{ org_id: string }>('SELECT org_id FROM customer_counts ORDER BY n DESC LIMIT 1')
  ).rows
  if (!largest) throw new Error(`${url} holds no customers`)
  const asText = { getTypeParser: () => (text: string) => text }
  const customers = columnsOf(itemFieldsOf(CUSTOMER))
  const appointments = columnsOf(itemFieldsOf(APPOINTMENT))
  for (const [name, statement, columns, limit] of [
    ['customers, 50', customersPage(largest.org_id), customers, 50],
    ['customers, 100', customersPage(largest.org_id), customers, 100],
    ['appointments, 50', appointmentsPage(largest.org_id, {}), appointments, 50],
  ] as const) {
    await client.query(`BEGIN; ${READER_SETTINGS}`)
    await client.query("SELECT set_config('openbook.org_id', $1, true)", [largest.org_id])
    const result = await client.query({
      text: rowsTextFor(statement, { offset: 100 }),
      values: pageParams(statement, { limit, offset: 100 }, []) as unknown[],
      rowMode: 'array',
      types: asText,
    })
    await client.query('COMMIT')
    raw.set(name, { statement, columns, raw: { fields: result.fields, rows: result.rows } })
  }
} finally {
  await client.end()
}

/** pg's own result builder (`pg.Result`, not in its types): what makes each row of an answer. */
const ResultBuilder = (pg as unknown as { Result: new () => ResultBuilder }).Result
interface ResultBuilder {
  addFields(fields: pg.FieldDef[]): void
  parseRow(values: (string | null)[]): Record<string, unknown>
}

/** The rows as pg's `Result` makes them from the text, each field a string of its own. */
function pgRows({ fields, rows }: Raw): Record<string, unknown>[] {
  const result = new ResultBuilder()
  result.addFields(fields)
  return rows.map((values) =>
    result.parseRow(values.map((value) => (value === null ? null : ` ${value}`.slice(1)))),
  )
}

/** The result's rows as the DataRow messages PostgreSQL sent. */
function dataRows({ rows }: Raw): Buffer {
  return Buffer.concat(
    rows.map((values) => {
      const fields = values.map((value) => {
        const bytes = value === null ? Buffer.alloc(0) : Buffer.from(value)
        const length = Buffer.alloc(4)
        length.writeInt32BE(value === null ? -1 : bytes.length)
        return Buffer.concat([length, bytes])
      })
      const head = Buffer.alloc(7)
      head[0] = 0x44
      head.writeInt32BE(6 + fields.reduce((sum, field) => sum + field.length, 0), 1)
      head.writeInt16BE(values.length, 5)
      return Buffer.concat([head, ...fields])
    }),
  )
}

/** pg-protocol's parser with each DataRow message handed to `row` (as store/postgres/row-tap.ts does). */
function parseRows(wire: Buffer, row: (bytes: Buffer, offset: number, length: number) => void) {
  const parser = new Parser() as unknown as {
    parse(buffer: Buffer, callback: () => void): void
    handlePacket(offset: number, code: number, length: number, bytes: Buffer): unknown
  }
  parser.handlePacket = (offset, _code, length, bytes) => row(bytes, offset, length)
  parser.parse(wire, () => undefined)
}

/** From the messages: pg-protocol's strings, pg's rows, `itemsJson`, then bytes. */
function throughPg({ fields }: Raw, wire: Buffer, statement: PageStatement): Buffer {
  const result = new ResultBuilder()
  result.addFields(fields)
  const rows: Record<string, unknown>[] = []
  new Parser().parse(wire, (message) => {
    rows.push(result.parseRow((message as unknown as { fields: (string | null)[] }).fields))
  })
  return Buffer.from(itemsJson(rows, statement))
}

/** From the messages: the items written from their bytes. */
function fromBytes({ fields }: Raw, wire: Buffer, statement: PageStatement): Buffer {
  const writer = new PageBytesWriter(statement)
  writer.accepts(fields)
  parseRows(wire, (bytes, offset, length) => writer.row(bytes, offset, length))
  return writer.finish().items
}

const median = (sorted: number[], at = 0.5) => sorted[Math.floor((sorted.length - 1) * at)] ?? Number.NaN
console.log(
  '| page | rows | rows + `itemsJson` | rows + member by member | the items alone, as bytes | as strings | ' +
    "from the messages: pg's rows + `itemsJson` | from the messages' bytes |",
)
console.log('| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: |')
for (const [name, { statement, columns, raw: page }] of raw) {
  if (itemsJson(pgRows(page), statement) !== itemsByMembers(pgRows(page), columns))
    throw new Error(`${name}: the two writers differ`)
  const wire = dataRows(page)
  if (!throughPg(page, wire, statement).equals(fromBytes(page, wire, statement)))
    throw new Error(`${name}: the items from the bytes differ`)
  const variants: [string, () => unknown][] = [
    ['rows', () => pgRows(page)],
    ['itemsJson', () => Buffer.from(itemsJson(pgRows(page), statement))],
    ['members', () => Buffer.from(itemsByMembers(pgRows(page), columns))],
    ['itemsJson string', () => itemsJson(pgRows(page), statement)],
    ['members string', () => itemsByMembers(pgRows(page), columns)],
    ['wire pg', () => throughPg(page, wire, statement)],
    ['wire bytes', () => fromBytes(page, wire, statement)],
  ]
  const times = new Map<string, number[]>(variants.map(([variant]) => [variant, []]))
  for (const [, run] of variants) for (let i = 0; i < 2000; i++) run()
  for (let batch = 0; batch < Number(values.batches); batch++)
    for (const [variant, run] of variants) {
      const started = process.hrtime.bigint()
      for (let i = 0; i < 300; i++) run()
      times.get(variant)?.push(Number(process.hrtime.bigint() - started) / 300 / 1000)
    }
  const sorted = (variant: string) => [...(times.get(variant) ?? [])].sort((a, b) => a - b)
  const cell = (variant: string) => {
    const all = sorted(variant)
    return `${median(all).toFixed(0)} (${median(all, 0.25).toFixed(0)}-${median(all, 0.75).toFixed(0)})`
  }
  const rows = median(sorted('rows'))
  const alone = (a: string, b: string) =>
    `${(median(sorted(a)) - rows).toFixed(0)} → ${(median(sorted(b)) - rows).toFixed(0)} µs`
  console.log(
    `| ${name} | ${cell('rows')} | ${cell('itemsJson')} | ${cell('members')} | ` +
      `${alone('itemsJson', 'members')} | ${alone('itemsJson string', 'members string')} | ` +
      `${cell('wire pg')} | ${cell('wire bytes')} |`,
  )
}
