import { createInterface } from 'node:readline'
import type { Readable } from 'node:stream'
import { OperatorError } from '../domain/api-keys.js'
import { RECORD_TYPES, type RecordType, TABLES, upsertRows, WRITE_ORDER } from '../store/bulk.js'
import type { Sql, Store } from '../store/types.js'
import { RECORD_SCHEMAS, toRow } from './records.js'

const BATCH_SIZE = 5_000

/** Foreign keys by constraint name: which field of which record type points where. */
const REFERENCES: Readonly<
  Record<string, { type: RecordType; field: string; column: string; parent: string }>
> = {
  memberships_org_id_fkey: { type: 'membership', field: 'orgId', column: 'org_id', parent: 'organizations' },
  memberships_user_id_fkey: { type: 'membership', field: 'userId', column: 'user_id', parent: 'users' },
  staff_org_id_fkey: { type: 'staff', field: 'orgId', column: 'org_id', parent: 'organizations' },
  services_org_id_fkey: { type: 'service', field: 'orgId', column: 'org_id', parent: 'organizations' },
  customers_org_id_fkey: { type: 'customer', field: 'orgId', column: 'org_id', parent: 'organizations' },
  customers_org_id_preferred_staff_id_fkey: {
    type: 'customer',
    field: 'preferredStaffId',
    column: 'preferred_staff_id',
    parent: 'staff',
  },
  appointments_org_id_fkey: {
    type: 'appointment',
    field: 'orgId',
    column: 'org_id',
    parent: 'organizations',
  },
  appointments_org_id_customer_id_fkey: {
    type: 'appointment',
    field: 'customerId',
    column: 'customer_id',
    parent: 'customers',
  },
  appointments_org_id_staff_id_fkey: {
    type: 'appointment',
    field: 'staffId',
    column: 'staff_id',
    parent: 'staff',
  },
  appointments_org_id_service_id_fkey: {
    type: 'appointment',
    field: 'serviceId',
    column: 'service_id',
    parent: 'services',
  },
}

export class ImportError extends OperatorError {}

export interface ImportSummary {
  readonly lines: number
  readonly counts: Partial<Record<RecordType, number>>
}

type Pending = Map<string, Record<string, unknown>>

function keyOf(type: RecordType, row: Record<string, unknown>): string {
  return TABLES[type].key.map((column) => String(row[column])).join('\u0000')
}

/** The first line of a failed batch whose reference points at nothing in its organization. */
async function findBrokenReference(sql: Sql, constraint: string, rows: readonly Record<string, unknown>[]) {
  const reference = REFERENCES[constraint]
  if (!reference) return undefined
  const scope =
    reference.parent === 'organizations' || reference.parent === 'users' ? '' : 'AND p.org_id = r.org_id'
  const [row] = await sql.query<{ line: number }>(
    `SELECT r._line AS line FROM json_to_recordset($1::json) AS r(_line int, org_id text, ${reference.column} text)
     WHERE r.${reference.column} IS NOT NULL
       AND NOT EXISTS (SELECT 1 FROM ${reference.parent} p WHERE p.id = r.${reference.column} ${scope})
     ORDER BY 1 LIMIT 1`,
    [JSON.stringify(rows)],
  )
  return row ? { line: row.line, reference } : undefined
}

async function writeBatch(sql: Sql, type: RecordType, pending: Pending): Promise<void> {
  const rows = [...pending.values()]
  pending.clear()
  await sql.exec('SAVEPOINT import_batch')
  try {
    await upsertRows(sql, type, rows)
    await sql.exec('RELEASE SAVEPOINT import_batch')
  } catch (error) {
    await sql.exec('ROLLBACK TO SAVEPOINT import_batch')
    const { code, constraint } = error as { code?: string; constraint?: string }
    if (code === '23503' && constraint) {
      const broken = await findBrokenReference(sql, constraint, rows)
      if (broken) {
        throw new ImportError(
          `line ${broken.line}: ${type}.${broken.reference.field}: refers to a ${broken.reference.parent.replace(/s$/, '')} that is not in this organization (earlier in the file or already stored)`,
        )
      }
    }
    const lines = rows.map((row) => Number(row._line))
    throw new ImportError(
      `lines ${Math.min(...lines)}-${Math.max(...lines)}: ${type} rejected by the database (${constraint ?? code ?? 'constraint'})`,
    )
  }
}

const newPending = () => new Map<RecordType, Pending>(RECORD_TYPES.map((type) => [type, new Map()]))

/**
 * Streams NDJSON into the store in one transaction: every line is validated,
 * rows are upserted in batches (parents first), and any bad line rejects the
 * whole file with its line number and field.
 *
 * One batch is written while the next is parsed (the database and the parser
 * work at the same time), so at most two batches are held in memory. Batches
 * are still written one after the other, in file order, and an error in an
 * earlier batch is reported before any error in a later line.
 */
export async function importNdjson(
  store: Store,
  input: Readable,
  onProgress: (lines: number) => void = () => {},
): Promise<ImportSummary> {
  const counts: Partial<Record<RecordType, number>> = {}
  let pending = newPending()
  let lineNumber = 0
  let writing: Promise<void> = Promise.resolve()

  async function writeAll(sql: Sql, batch: Map<RecordType, Pending>, upTo: number): Promise<void> {
    for (const type of WRITE_ORDER) {
      const rows = batch.get(type)
      if (rows?.size) await writeBatch(sql, type, rows)
    }
    onProgress(upTo)
  }

  /** Waits for the batch being written, then starts writing the buffered rows and returns. */
  async function flush(sql: Sql): Promise<void> {
    await writing
    const batch = pending
    pending = newPending()
    writing = writeAll(sql, batch, lineNumber)
    // Awaited at the next flush, at the end, or before a parse error is reported.
    writing.catch(() => {})
  }

  await store.admin(async (sql) => {
    const lines = createInterface({ input, crlfDelay: Number.POSITIVE_INFINITY })
    let buffered = 0
    try {
      for await (const line of lines) {
        lineNumber++
        if (line.trim() === '') continue
        let parsed: unknown
        try {
          parsed = JSON.parse(line)
        } catch {
          throw new ImportError(`line ${lineNumber}: not valid JSON`)
        }
        if (typeof parsed !== 'object' || parsed === null || Array.isArray(parsed)) {
          throw new ImportError(`line ${lineNumber}: not a JSON object`)
        }
        const { type, ...fields } = parsed as Record<string, unknown>
        if (typeof type !== 'string' || !(type in RECORD_SCHEMAS)) {
          throw new ImportError(`line ${lineNumber}: type: must be one of ${RECORD_TYPES.join(', ')}`)
        }
        const recordType = type as RecordType
        const result = RECORD_SCHEMAS[recordType].safeParse(fields)
        if (!result.success) {
          const issue = result.error.issues[0]
          const field = issue?.code === 'unrecognized_keys' ? issue.keys.join(', ') : issue?.path.join('.')
          throw new ImportError(
            `line ${lineNumber}: ${recordType}.${field || '?'}: ${issue?.message ?? 'invalid'}`,
          )
        }
        const row = toRow(result.data as Record<string, unknown>)
        row._line = lineNumber
        // A later line with the same key replaces an earlier one, as a second import would.
        pending.get(recordType)?.set(keyOf(recordType, row), row)
        counts[recordType] = (counts[recordType] ?? 0) + 1
        if (++buffered >= BATCH_SIZE) {
          await flush(sql)
          buffered = 0
        }
      }
    } catch (error) {
      // A batch of earlier lines still being written may fail too: its error comes first.
      await writing
      throw error
    }
    await flush(sql)
    await writing
  })
  return { lines: lineNumber, counts }
}
