import type { AdminSql } from '../store/types.js'
import { ImportError } from './errors.js'
import { keyLog, staging } from './staging.js'
import { type RecordType, TABLES } from './tables.js'

/**
 * The rules COPY cannot check, as one set-based query over a chunk's staging tables: every
 * reference points at a record stored or on an earlier line, inside the same organization, and
 * no two users share an e-mail.
 */

interface Reference {
  readonly field: string
  readonly column: string
  readonly parent: RecordType
}

/** Every foreign key, as the record field that holds it; tenant parents are matched by org_id too. */
const REFERENCES: Readonly<Partial<Record<RecordType, readonly Reference[]>>> = {
  membership: [
    { field: 'orgId', column: 'org_id', parent: 'organization' },
    { field: 'userId', column: 'user_id', parent: 'user' },
  ],
  staff: [{ field: 'orgId', column: 'org_id', parent: 'organization' }],
  service: [{ field: 'orgId', column: 'org_id', parent: 'organization' }],
  customer: [
    { field: 'orgId', column: 'org_id', parent: 'organization' },
    { field: 'preferredStaffId', column: 'preferred_staff_id', parent: 'staff' },
  ],
  appointment: [
    { field: 'orgId', column: 'org_id', parent: 'organization' },
    { field: 'customerId', column: 'customer_id', parent: 'customer' },
    { field: 'staffId', column: 'staff_id', parent: 'staff' },
    { field: 'serviceId', column: 'service_id', parent: 'service' },
  ],
}

const GLOBAL_PARENTS: readonly RecordType[] = ['organization', 'user']

/** How a message names one record of a type: "refers to a user that …". */
const A_RECORD: Readonly<Record<RecordType, string>> = {
  organization: 'an organization',
  user: 'a user',
  membership: 'a membership',
  staff: 'a staff member',
  service: 'a service',
  customer: 'a customer',
  appointment: 'an appointment',
}

/** The first problem the set-based checks found in a chunk. */
interface Finding {
  readonly line: number
  readonly type: RecordType
  readonly field: string
  readonly problem: string
}

/**
 * The first line whose reference points at nothing: not at a key seen on an earlier line of the
 * file (the key log: narrow rows in temporary tables, so asked first), nor at a row stored before
 * this chunk. Rows stored from earlier chunks are in the key log with earlier lines, so the
 * second probe can only succeed for rows that were there before the import.
 */
function referenceCheck(type: RecordType, reference: Reference): string {
  const parent = TABLES[reference.parent].table
  const scoped = !GLOBAL_PARENTS.includes(reference.parent)
  const match = `p.id = r.${reference.column}${scoped ? ' AND p.org_id = r.org_id' : ''}`
  const what = scoped
    ? `refers to ${A_RECORD[reference.parent]} that is not in this organization (earlier in the file or already stored)`
    : `refers to ${A_RECORD[reference.parent]} that does not exist (earlier in the file or already stored)`
  return `SELECT min(r._line) AS line, '${type}' AS type, '${reference.field}' AS field, '${what}' AS problem
    FROM (SELECT * FROM ${staging(type)} r
          WHERE r.${reference.column} IS NOT NULL
            AND NOT EXISTS (SELECT 1 FROM ${keyLog(reference.parent)} p WHERE ${match} AND p._first < r._line)
          OFFSET 0) AS r
    WHERE NOT EXISTS (SELECT 1 FROM ${parent} p WHERE ${match})`
}

/** Another user (a different id) holds the e-mail already, in the store or earlier in the file. */
const EMAIL_CHECK = `SELECT min(r._line) AS line, 'user' AS type, 'email' AS field,
    'is the e-mail of another user' AS problem
  FROM ${staging('user')} r
  WHERE EXISTS (SELECT 1 FROM users u WHERE lower(u.email) = lower(r.email) AND u.id <> r.id)
     OR EXISTS (SELECT 1 FROM ${staging('user')} u
                WHERE lower(u.email) = lower(r.email) AND u.id <> r.id AND u._first < r._line)`

function checksFor(types: readonly RecordType[]): string | undefined {
  const parts = types.flatMap((type) => (REFERENCES[type] ?? []).map((ref) => referenceCheck(type, ref)))
  if (types.includes('user')) parts.push(EMAIL_CHECK)
  if (parts.length === 0) return undefined
  return `SELECT * FROM (${parts.map((p) => `(${p})`).join(' UNION ALL ')}) AS found
    WHERE line IS NOT NULL ORDER BY line LIMIT 1`
}

/** Refuses the chunk at its first line that breaks a rule, naming line and field. */
export async function checkStaged(sql: AdminSql, types: readonly RecordType[]): Promise<void> {
  const checks = checksFor(types)
  if (!checks) return
  const [found] = await sql.query<Finding>(checks)
  if (found) throw new ImportError(`line ${found.line}: ${found.type}.${found.field}: ${found.problem}`)
}
