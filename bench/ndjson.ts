import { once } from 'node:events'
import { createWriteStream } from 'node:fs'
import { organizationRows, planOrganizations, type Row, type SyntheticPlan } from '../src/seed/synthetic.js'

/** Column name → the import format's field name (the API's names). */
const FIELD_OF: Readonly<Record<string, string>> = { start_at: 'start', end_at: 'end' }
const fieldOf = (column: string) =>
  FIELD_OF[column] ?? column.replace(/_([a-z0-9])/g, (_, c: string) => c.toUpperCase())

/** One synthetic row as an import line: its type, the API's field names, empty fields left out. */
export function toLine(type: string, row: Row): string {
  const record: Record<string, unknown> = { type }
  for (const [column, value] of Object.entries(row)) {
    if (value !== null) record[fieldOf(column)] = value
  }
  return JSON.stringify(record)
}

export interface Written {
  readonly lines: number
  readonly bytes: number
  readonly counts: Record<string, number>
}

/**
 * Writes exactly `lines` NDJSON lines of realistic data: organizations with their owner,
 * staff and services, then customers and appointments, with the seed's skewed sizes.
 * Streams with back-pressure, so memory stays flat whatever the size.
 */
export async function writeNdjson(file: string, lines: number, seed: number): Promise<Written> {
  const plan: SyntheticPlan = {
    orgs: Math.max(1, Math.round(lines / 20_000)),
    customers: Math.ceil(lines * 0.34),
    appointments: Math.ceil(lines * 0.68),
    seed,
  }
  const out = createWriteStream(file)
  const counts: Record<string, number> = {}
  let written = 0
  let bytes = 0
  let chunk: string[] = []
  const flush = async () => {
    const text = `${chunk.join('\n')}\n`
    chunk = []
    bytes += Buffer.byteLength(text)
    if (!out.write(text)) await once(out, 'drain')
  }
  outer: for (const org of planOrganizations(plan)) {
    for (const batch of organizationRows(org.index, org.customers, org.appointments, plan)) {
      for (const row of batch.rows) {
        if (written === lines) break outer
        chunk.push(toLine(batch.type, row))
        counts[batch.type] = (counts[batch.type] ?? 0) + 1
        written++
        if (chunk.length === 2_000) await flush()
      }
    }
  }
  if (chunk.length) await flush()
  out.end()
  await once(out, 'finish')
  return { lines: written, bytes, counts }
}
