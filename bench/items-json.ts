/**
 * Node's cost of a page's rows in one process: pg making the rows of a real page (the largest
 * organization's, read once as PostgreSQL's text) and `itemsJson` writing them as items, against
 * the serializer it replaced (every row's NULLs set to undefined in place, then one
 * JSON.stringify of the rows). Interleaved batches, median and quartiles of each; both write the
 * same bytes (checked).
 *
 *   node --import tsx bench/items-json.ts [DATABASE_URL] [--batches 40]
 */
import { parseArgs } from 'node:util'
import pg from 'pg'
import { appointmentsPage } from '../src/queries/appointments.js'
import { customersPage } from '../src/queries/customers.js'
import { isoFromPostgres, itemsJson } from '../src/queries/page-rows.js'
import { type PageStatement, pageParams } from '../src/queries/page-statement.js'
import { READER_SETTINGS } from './sql.js'

const { values, positionals } = parseArgs({
  options: { batches: { type: 'string', default: '40' } },
  allowPositionals: true,
})
const url = positionals[0] ?? 'postgres://root@127.0.0.1:5432/openbook_bench_100k'

/** The serializer `itemsJson` replaced: the rows changed in place, then one JSON.stringify. */
function itemsByStringify(rows: Record<string, unknown>[], statement: PageStatement): string {
  for (const row of rows) {
    row.total = undefined
    row.version = undefined
    row.latest = undefined
    row.org = undefined
    for (const column of statement.itemColumns) {
      const value = row[column.key]
      if (value === null && !column.nullable) row[column.key] = undefined
      else if (column.timestamp && typeof value === 'string') row[column.key] = isoFromPostgres(value)
    }
  }
  return JSON.stringify(rows).slice(1, -1)
}

/** A result as PostgreSQL sent it: its fields and each row's text, for pg to parse again and again. */
interface Raw {
  readonly fields: pg.FieldDef[]
  readonly rows: (string | null)[][]
}

const client = new pg.Client({ connectionString: url })
await client.connect()
const raw = new Map<string, { statement: PageStatement; raw: Raw }>()
try {
  const [largest] = (
    await client.query<{ org_id: string }>('SELECT org_id FROM customer_counts ORDER BY n DESC LIMIT 1')
  ).rows
  if (!largest) throw new Error(`${url} holds no customers`)
  const asText = { getTypeParser: () => (text: string) => text }
  for (const [name, statement, limit] of [
    ['customers, 50', customersPage(largest.org_id), 50],
    ['customers, 100', customersPage(largest.org_id), 100],
    ['appointments, 50', appointmentsPage(largest.org_id, {}), 50],
  ] as const) {
    await client.query(`BEGIN; ${READER_SETTINGS}`)
    await client.query("SELECT set_config('openbook.org_id', $1, true)", [largest.org_id])
    const result = await client.query({
      text: statement.rowsText,
      values: pageParams(statement, { limit, offset: 100 }, []) as unknown[],
      rowMode: 'array',
      types: asText,
    })
    await client.query('COMMIT')
    raw.set(name, { statement, raw: { fields: result.fields, rows: result.rows } })
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

const median = (sorted: number[], at = 0.5) => sorted[Math.floor((sorted.length - 1) * at)] ?? Number.NaN
console.log('| page | rows | rows + JSON.stringify | rows + itemsJson | items alone: before → after |')
console.log('| --- | ---: | ---: | ---: | ---: |')
for (const [name, { statement, raw: page }] of raw) {
  if (itemsJson(pgRows(page), statement) !== itemsByStringify(pgRows(page), statement))
    throw new Error(`${name}: the two serializers differ`)
  const variants: [string, () => unknown][] = [
    ['rows', () => pgRows(page)],
    ['stringify', () => itemsByStringify(pgRows(page), statement)],
    ['itemsJson', () => itemsJson(pgRows(page), statement)],
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
  console.log(
    `| ${name} | ${cell('rows')} | ${cell('stringify')} | ${cell('itemsJson')} | ` +
      `${(median(sorted('stringify')) - rows).toFixed(0)} → ${(median(sorted('itemsJson')) - rows).toFixed(0)} µs |`,
  )
}
