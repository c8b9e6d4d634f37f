import { APPOINTMENT, CUSTOMER, columnsOf, type ResourceDescription } from '../schemas/descriptions.js'
import type { Sql } from '../store/types.js'

/**
 * How each record type of the import is stored: its table, its fields each with its column, the
 * upsert key. A record's value is read by its field's name, never by a name made from the column.
 * `defaults`: the value of a column left out of a new row. `keep`: columns that, left out, keep
 * an existing row's value rather than take the default (a record without them changes nothing).
 */
interface TableSpec {
  readonly table: string
  readonly key: readonly string[]
  /** The import format's field names, in the order of `columns`. */
  readonly fields: readonly string[]
  readonly columns: readonly string[]
  readonly defaults?: Readonly<Record<string, string>>
  readonly keep?: readonly string[]
}

/** A table's spec from [field, column] pairs, in the columns' order. */
function spec(
  table: string,
  key: readonly string[],
  pairs: readonly (readonly [field: string, column: string])[],
  more: Pick<TableSpec, 'defaults' | 'keep'> = {},
): TableSpec {
  return {
    table,
    key,
    fields: pairs.map(([field]) => field),
    columns: pairs.map(([, column]) => column),
    ...more,
  }
}

/** An API resource's spec, from its one description: its columns the key's first (the bulk loader's order). */
function resourceSpec(resource: ResourceDescription): TableSpec {
  const columns = columnsOf(resource)
  const fieldOf = new Map(resource.fields.map(({ field, column }) => [column, field]))
  return spec(
    resource.table,
    resource.key,
    columns.map((column) => {
      const field = fieldOf.get(column)
      if (!field) throw new Error(`${resource.table}.${column} has no field in its description`)
      return [field, column] as const
    }),
  )
}

/** An organization's named, active-by-default rows (its staff, its services). */
const namedChild = (table: string) =>
  spec(
    table,
    ['org_id', 'id'],
    [
      ['orgId', 'org_id'],
      ['id', 'id'],
      ['name', 'name'],
      ['isActive', 'is_active'],
    ],
    { defaults: { is_active: 'true' } },
  )

export const TABLES = {
  organization: spec(
    'organizations',
    ['id'],
    [
      ['id', 'id'],
      ['name', 'name'],
      ['plan', 'plan'],
      ['createdAt', 'created_at'],
    ],
    // A record without createdAt keeps the stored one: now() again would rewrite the row.
    { defaults: { created_at: 'now()' }, keep: ['created_at'] },
  ),
  user: spec(
    'users',
    ['id'],
    [
      ['id', 'id'],
      ['email', 'email'],
      ['name', 'name'],
    ],
  ),
  membership: spec(
    'memberships',
    ['org_id', 'user_id'],
    [
      ['orgId', 'org_id'],
      ['userId', 'user_id'],
      ['role', 'role'],
    ],
  ),
  staff: namedChild('staff'),
  service: namedChild('services'),
  // The API's resources: their fields and columns from their one description.
  customer: resourceSpec(CUSTOMER),
  appointment: resourceSpec(APPOINTMENT),
} as const satisfies Record<string, TableSpec>

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

/** The field of one of a type's columns, by its spec. */
export function fieldOf(type: RecordType, column: string): string {
  const spec: TableSpec = TABLES[type]
  const field = spec.fields[spec.columns.indexOf(column)]
  if (field === undefined) throw new Error(`${spec.table} has no column ${column}`)
  return field
}

/** Each type's field names, in the order of its columns. */
export const FIELDS: Readonly<Record<RecordType, readonly string[]>> = (() => {
  const fields = {} as Record<RecordType, readonly string[]>
  for (const type of RECORD_TYPES) fields[type] = TABLES[type].fields
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
  for (const type of RECORD_TYPES) keys[type] = TABLES[type].key.map((column) => fieldOf(type, column))
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
