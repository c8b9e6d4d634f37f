import type { Sql } from './types.js'

/** How each record type is stored: table, columns (snake_case) and upsert key. */
export const TABLES = {
  organization: {
    table: 'organizations',
    key: ['id'],
    columns: ['id', 'name', 'plan', 'created_at'],
    defaults: { created_at: 'now()' },
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
  customer: {
    table: 'customers',
    key: ['org_id', 'id'],
    columns: [
      'org_id',
      'id',
      'support_id',
      'first_name',
      'last_name',
      'display_name',
      'email',
      'phone',
      'primary_phone',
      'secondary_phone',
      'preferred_contact_method',
      'date_of_birth',
      'gender',
      'notes',
      'marketing_consent',
      'address_line1',
      'city',
      'region',
      'postal_code',
      'country',
      'preferred_staff_id',
      'is_active',
      'created_at',
      'updated_at',
    ],
  },
  appointment: {
    table: 'appointments',
    key: ['org_id', 'id'],
    columns: [
      'org_id',
      'id',
      'customer_id',
      'staff_id',
      'service_id',
      'start_at',
      'end_at',
      'status',
      'location_type',
      'resource_id',
      'price_cents',
      'currency',
      'note',
      'payment_status',
      'amount_paid_cents',
      'payment_kind',
      'payment_id',
      'invoice_id',
      'requires_payment',
      'confirmed_after_payment',
      'day_key',
      'is_active',
      'created_at',
      'updated_at',
    ],
  },
} as const satisfies Record<
  string,
  { table: string; key: readonly string[]; columns: readonly string[]; defaults?: Record<string, string> }
>

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

const statements = new Map<RecordType, string>()

function upsertSql(type: RecordType): string {
  const cached = statements.get(type)
  if (cached) return cached
  const spec: {
    table: string
    key: readonly string[]
    columns: readonly string[]
    defaults?: Record<string, string>
  } = TABLES[type]
  const { table, key, columns } = spec
  const list = columns.join(', ')
  // A field left out of a record takes the column's default rather than NULL.
  const values = columns
    .map((c) => (spec.defaults?.[c] ? `coalesce(${c}, ${spec.defaults[c]})` : c))
    .join(', ')
  const updates = columns.filter((c) => !(key as readonly string[]).includes(c))
  const conflict = updates.length
    ? `DO UPDATE SET ${updates.map((c) => `${c} = EXCLUDED.${c}`).join(', ')}`
    : 'DO NOTHING'
  // Rows travel as one JSON parameter: one statement per batch, the same on PostgreSQL and PGlite.
  const text = `INSERT INTO ${table} (${list})
    SELECT ${values} FROM json_populate_recordset(NULL::${table}, $1::json)
    ON CONFLICT (${key.join(', ')}) ${conflict}`
  statements.set(type, text)
  return text
}

/** Upserts rows (snake_case keys) of one type in a single statement. */
export async function upsertRows(sql: Sql, type: RecordType, rows: readonly object[]): Promise<void> {
  if (rows.length === 0) return
  await sql.query(upsertSql(type), [JSON.stringify(rows)])
}
