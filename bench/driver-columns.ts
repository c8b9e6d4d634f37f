/**
 * What pg spends on the columns of a request's results when it is told them (a RowDescription
 * becomes a Result's type parsers and a template row of every column's name), in one process: the
 * request's three results as pg was told them before (the settings, a column each; the key
 * lookup; a page of customers) against as it is told them now (the settings in one column, the
 * key lookup, and no column of the page, whose rows the connection hands to the page's writer).
 * Interleaved batches, median and quartiles, µs a request.
 *
 *   node --import tsx bench/driver-columns.ts [--batches 30]
 */
import { createRequire } from 'node:module'
import { parseArgs } from 'node:util'
import { customersPage } from '../src/queries/customers.js'
import { readerPreamble } from '../src/store/reader-settings.js'

const { values } = parseArgs({ options: { batches: { type: 'string', default: '30' } } })
const TEXT = 25
const TIMESTAMPTZ = 1184
const field = (name: string, dataTypeID = TEXT) => ({ name, dataTypeID, format: 'text' })
const settingsCount = readerPreamble(true, 5000).match(/set_config\(/g)?.length ?? 0
const lookup = [
  field('orgId'),
  field('keyId'),
  field('lastUsedAt', TIMESTAMPTZ),
  field('expiresAt', TIMESTAMPTZ),
  field('state'),
  field('cleared'),
]
const page = [...customersPage('org').columns, 'total', 'version', 'latest', 'org'].map((name) => field(name))
const forms = {
  before: [Array.from({ length: settingsCount }, () => field('set_config')), lookup, page],
  now: [[field('concat')], lookup, []],
}

type AddFields = (fields: readonly ReturnType<typeof field>[]) => void
/** pg's Result, which it makes of every result it is told of (not in pg's typings). */
const PgResult = createRequire(import.meta.url)('pg/lib/result.js') as new () => { addFields: AddFields }
const samples: Record<string, number[]> = { before: [], now: [] }
const perBatch = 2000
for (let batch = 0; batch < Number(values.batches) + 3; batch++)
  for (const [name, results] of Object.entries(forms)) {
    const started = process.hrtime.bigint()
    for (let i = 0; i < perBatch; i++) for (const fields of results) new PgResult().addFields(fields)
    const us = Number(process.hrtime.bigint() - started) / 1000 / perBatch
    if (batch >= 3) samples[name]?.push(us)
  }
const at = (sorted: number[], q: number) => sorted[Math.floor(q * (sorted.length - 1))]?.toFixed(1)
console.log(`| Columns pg is told | Columns | µs a request, median (quartiles) |`)
console.log('| --- | ---: | --- |')
for (const [name, results] of Object.entries(forms)) {
  const sorted = [...(samples[name] ?? [])].sort((a, b) => a - b)
  const columns = results.map((fields) => fields.length).join(' + ')
  console.log(`| ${name} | ${columns} | ${at(sorted, 0.5)} (${at(sorted, 0.25)}-${at(sorted, 0.75)}) |`)
}
