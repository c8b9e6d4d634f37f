import { fieldOf, type RecordType } from '../src/import/tables.js'
import { organizationRows, planOrganizations, type Row, type SyntheticPlan } from '../src/seed/synthetic.js'

/** One synthetic row as an import line: its type, the API's field names, empty fields left out. */
export function toLine(type: RecordType, row: Row): string {
  const record: Record<string, unknown> = { type }
  for (const [column, value] of Object.entries(row)) {
    if (value !== null) record[fieldOf(type, column)] = value
  }
  return JSON.stringify(record)
}

/**
 * Exactly `lines` NDJSON lines of realistic data, in an order an import accepts: organizations
 * with their owner, staff and services, then their customers and appointments, with the seed's
 * skewed sizes. For benchmarks and tests of `openbook import`.
 */
export function* syntheticLines(lines: number, seed: number): Generator<{ type: RecordType; line: string }> {
  const plan: SyntheticPlan = {
    orgs: Math.max(1, Math.round(lines / 20_000)),
    customers: Math.ceil(lines * 0.34),
    appointments: Math.ceil(lines * 0.68),
    seed,
  }
  let written = 0
  for (const org of planOrganizations(plan)) {
    for (const batch of organizationRows(org.index, org.customers, org.appointments, plan)) {
      for (const row of batch.rows) {
        if (written++ === lines) return
        yield { type: batch.type, line: toLine(batch.type, row) }
      }
    }
  }
}
