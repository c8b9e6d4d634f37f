import { APPOINTMENT, CUSTOMER, columnsOf } from '../schemas/descriptions.js'
import type { Sql } from './types.js'

/** How each record type is stored: table, columns (snake_case) and upsert key. */
export const TABLES = {
  organization: {
    table: 'organizations',
    key: ['id'],
    columns: ['id', 'name', 'plan', 'created_at'],
    defaults: { created_at: 'now()' },
    // A record without createdAt keeps the stored one: now() again would rewrite the row.
    keep: ['created_at'],
  },
  user: { table: 'users', key: ['id'], columns: ['id', 'email', 'name'] },
  membership: { table: 'memberships', key: ['org_id', 'user_id'], columns: ['org_id', 'user_id', 'role'] },
  staff: {
    table: 'staff',
    key: ['org_id', 'id'],
    columns: ['org_id', 'id', 'name', 'is_active'],
    defaults: { is_active: 'true' },
  },
  service: {
    table: 'services',
    key: ['org_id', 'id'],
    columns: ['org_id', 'id', 'name', 'is_active'],
    defaults: { is_active: 'true' },
  },
  // The API's resources: their columns from their one description.
  customer: { table: CUSTOMER.table, key: CUSTOMER.key, columns: columnsOf(CUSTOMER) },
  appointment: { table: APPOINTMENT.table, key: APPOINTMENT.key, columns: columnsOf(APPOINTMENT) },
} as const satisfies Record<string, TableSpec>

/**
 * `defaults`: the value of a column left out of a new row. `keep`: columns that, left out, keep
 * an existing row's value rather than take the default (a record without them changes nothing).
 */
interface TableSpec {
  readonly table: string
  readonly key: readonly string[]
  readonly columns: readonly string[]
  readonly defaults?: Readonly<Record<string, string>>
  readonly keep?: readonly string[]
}

export type RecordType = keyof typeof TABLES
export const RECORD_TYPES = Object.keys(TABLES) as RecordType[]
/** Parents before children, so that every reference points at a row already written. */
export const WRITE_ORDER: readonly RecordType[] = [
  'organization',
  'user',
  'membership',
  'staff',
  'service',
  'customer',
  'appointment',
]

/** The import format's (and the API's) name of a column: camelCase, `start_at`/`end_at` as `start`/`end`. */
export function fieldOf(column: string): string {
  if (column === 'start_at') return 'start'
  if (column === 'end_at') return 'end'
  return column.replace(/_([a-z0-9])/g, (_, c: string) => c.toUpperCase())
}

/** Each type's field names, in the order of its columns. */
export const FIELDS: Readonly<Record<RecordType, readonly string[]>> = (() => {
  const fields = {} as Record<RecordType, readonly string[]>
  for (const type of RECORD_TYPES) fields[type] = TABLES[type].columns.map(fieldOf)
  return fields
})()

/** Each type's columns to keep when left out (`keep`), by their position among its columns. */
export const KEPT_COLUMNS: Readonly<Record<RecordType, readonly number[]>> = (() => {
  const kept = {} as Record<RecordType, readonly number[]>
  for (const type of RECORD_TYPES) {
    const spec: TableSpec = TABLES[type]
    kept[type] = (spec.keep ?? []).map((column) => spec.columns.indexOf(column))
  }
  return kept
})()

/** Each type's key, by field name. */
export const KEY_FIELDS: Readonly<Record<RecordType, readonly string[]>> = (() => {
  const keys = {} as Record<RecordType, readonly string[]>
  for (const type of RECORD_TYPES) keys[type] = TABLES[type].key.map(fieldOf)
  return keys
})()

/**
 * `INSERT INTO <table> SELECT … FROM <source>`, where `source` yields the table's columns. A field
 * left out takes the column's default rather than NULL. With `upsert`, an existing key is updated
 * where anything differs (a later record replaces an earlier one); without, it is a unique
 * violation (23505).
 */
export function insertSql(type: RecordType, source: string, upsert: boolean): string {
  const spec: TableSpec = TABLES[type]
  const { table, key, columns, keep = [] } = spec
  // Columns to keep are looked up in the stored row (s: the source, t: the table); the others'
  // statements stay as plain as they were.
  const from = keep.length
    ? `${source} s LEFT JOIN ${table} t ON ${key.map((k) => `t.${k} = s.${k}`).join(' AND ')}`
    : source
  const values = columns.map((c) => {
    const candidates = [
      keep.length ? `s.${c}` : c,
      ...(keep.includes(c) ? [`t.${c}`] : []),
      ...(spec.defaults?.[c] ? [spec.defaults[c]] : []),
    ]
    return candidates.length > 1 ? `coalesce(${candidates.join(', ')})` : candidates[0]
  })
  const updates = columns.filter((c) => !key.includes(c))
  // A row that would not change is left alone: no new row version, no index entries, no bloat
  // (importing the same file twice writes nothing the second time).
  const conflict = updates.length
    ? `DO UPDATE SET ${updates.map((c) => `${c} = EXCLUDED.${c}`).join(', ')}
       WHERE (${updates.map((c) => `${table}.${c}`).join(', ')})
             IS DISTINCT FROM (${updates.map((c) => `EXCLUDED.${c}`).join(', ')})`
    : 'DO NOTHING'
  return `INSERT INTO ${table} (${columns.join(', ')})
    SELECT ${values.join(', ')} FROM ${from}
    ${upsert ? `ON CONFLICT (${key.join(', ')}) ${conflict}` : ''}`
}

/** Upserts rows (snake_case keys) of one type in a single statement. */
export async function upsertRows(sql: Sql, type: RecordType, rows: readonly object[]): Promise<void> {
  if (rows.length === 0) return
  // Rows travel as one JSON parameter: one statement, the same on PostgreSQL and PGlite.
  const source = `json_populate_recordset(NULL::${TABLES[type].table}, $1::json)`
  await sql.query(insertSql(type, source, true), [JSON.stringify(rows)])
}
