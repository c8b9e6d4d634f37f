export const APPOINTMENT_STATUSES = [
  'scheduled',
  'confirmed',
  'checked_in',
  'no_show',
  'cancelled',
  'completed',
] as const
export const LOCATION_TYPES = ['in_person', 'online', 'phone', 'customer_address'] as const
export const PAYMENT_STATUSES = [
  'not_required',
  'unpaid',
  'pending',
  'partially_paid',
  'paid',
  'refunded',
  'failed',
] as const
export const PAYMENT_KINDS = ['card', 'cash', 'online', 'bank_transfer', 'gift_card', 'other'] as const
export const CONTACT_METHODS = ['email', 'phone', 'sms', 'whatsapp', 'none'] as const

/**
 * What a field holds, as the import checks it and the query writes it. `date` is a date column
 * written `YYYY-MM-DD`; `day` is a text column that holds one (an appointment's dayKey). An array
 * is an enumeration: the values the column's CHECK allows.
 */
export type FieldType =
  | 'id'
  | 'text'
  | 'timestamp'
  | 'date'
  | 'day'
  | 'boolean'
  | 'cents'
  | 'country'
  | 'currency'
  | readonly [string, ...string[]]

/** One field of a resource: its name in the API and the import, its column, and what it holds. */
export interface FieldDescription {
  readonly field: string
  readonly column: string
  readonly type: FieldType
  /** NOT NULL: an import record must give it. */
  readonly required?: true
  /** Stored and imported, never in the API's items. */
  readonly internal?: true
  /** In an item, null when the column holds no value; any other field is then left out. */
  readonly nullInItem?: true
  /** What the contract says of it beyond its type (the OpenAPI document's description). */
  readonly about?: string
}

/**
 * A resource's one description: the API's item schema (resources.ts), the query's item fields,
 * the bulk loader's columns, the nullable set and the import's record schema are derived from it,
 * and a test holds the migrated table to it. Fields in the contract's order (the item's).
 */
export interface ResourceDescription {
  readonly table: 'customers' | 'appointments'
  /** The primary key's columns. */
  readonly key: readonly string[]
  readonly fields: readonly FieldDescription[]
}

export const CUSTOMER = {
  table: 'customers',
  key: ['org_id', 'id'],
  fields: [
    { field: 'id', column: 'id', type: 'id', required: true },
    { field: 'orgId', column: 'org_id', type: 'id', required: true, internal: true },
    { field: 'supportId', column: 'support_id', type: 'text' },
    { field: 'firstName', column: 'first_name', type: 'text' },
    { field: 'lastName', column: 'last_name', type: 'text' },
    { field: 'displayName', column: 'display_name', type: 'text' },
    { field: 'email', column: 'email', type: 'text' },
    { field: 'phone', column: 'phone', type: 'text' },
    { field: 'primaryPhone', column: 'primary_phone', type: 'text' },
    { field: 'secondaryPhone', column: 'secondary_phone', type: 'text' },
    { field: 'preferredContactMethod', column: 'preferred_contact_method', type: CONTACT_METHODS },
    { field: 'dateOfBirth', column: 'date_of_birth', type: 'date' },
    { field: 'gender', column: 'gender', type: 'text' },
    { field: 'notes', column: 'notes', type: 'text', about: 'Confidential free text' },
    { field: 'marketingConsent', column: 'marketing_consent', type: 'boolean' },
    { field: 'addressLine1', column: 'address_line1', type: 'text' },
    { field: 'city', column: 'city', type: 'text' },
    { field: 'region', column: 'region', type: 'text' },
    { field: 'postalCode', column: 'postal_code', type: 'text' },
    { field: 'country', column: 'country', type: 'country', about: 'ISO 3166-1 alpha-2' },
    { field: 'preferredStaffId', column: 'preferred_staff_id', type: 'id' },
    { field: 'isActive', column: 'is_active', type: 'boolean', required: true },
    { field: 'createdAt', column: 'created_at', type: 'timestamp', required: true },
    { field: 'updatedAt', column: 'updated_at', type: 'timestamp', required: true },
  ],
} as const satisfies ResourceDescription

export const APPOINTMENT = {
  table: 'appointments',
  key: ['org_id', 'id'],
  fields: [
    { field: 'id', column: 'id', type: 'id', required: true },
    { field: 'start', column: 'start_at', type: 'timestamp', required: true },
    { field: 'end', column: 'end_at', type: 'timestamp', required: true },
    { field: 'orgId', column: 'org_id', type: 'id', required: true },
    { field: 'customerId', column: 'customer_id', type: 'id' },
    { field: 'staffId', column: 'staff_id', type: 'id' },
    { field: 'serviceId', column: 'service_id', type: 'id' },
    { field: 'status', column: 'status', type: APPOINTMENT_STATUSES, required: true },
    { field: 'locationType', column: 'location_type', type: LOCATION_TYPES },
    {
      field: 'resourceId',
      column: 'resource_id',
      type: 'id',
      about: 'Opaque id of the booked room, chair or equipment',
    },
    { field: 'priceCents', column: 'price_cents', type: 'cents' },
    { field: 'currency', column: 'currency', type: 'currency', about: 'ISO 4217 code' },
    { field: 'note', column: 'note', type: 'text', nullInItem: true },
    { field: 'paymentStatus', column: 'payment_status', type: PAYMENT_STATUSES },
    { field: 'amountPaidCents', column: 'amount_paid_cents', type: 'cents', nullInItem: true },
    { field: 'paymentKind', column: 'payment_kind', type: PAYMENT_KINDS, nullInItem: true },
    { field: 'paymentId', column: 'payment_id', type: 'id', nullInItem: true },
    { field: 'invoiceId', column: 'invoice_id', type: 'id', nullInItem: true },
    { field: 'requiresPayment', column: 'requires_payment', type: 'boolean' },
    { field: 'confirmedAfterPayment', column: 'confirmed_after_payment', type: 'boolean' },
    { field: 'dayKey', column: 'day_key', type: 'day', about: 'UTC calendar day of the start, YYYY-MM-DD' },
    { field: 'isActive', column: 'is_active', type: 'boolean', required: true, internal: true },
    { field: 'createdAt', column: 'created_at', type: 'timestamp', required: true },
    { field: 'updatedAt', column: 'updated_at', type: 'timestamp', required: true },
  ],
} as const satisfies ResourceDescription

/** The fields of the API's items, in the contract's order. */
export const itemFields = (resource: ResourceDescription): readonly FieldDescription[] =>
  resource.fields.filter((field) => !field.internal)

/**
 * Whether every item carries the field: an item leaves out only a NULL (page-statement.ts), so a
 * NOT NULL field is always there, and so is one written as null when empty. The API's schema
 * requires exactly these.
 */
export const inEveryItem = (field: FieldDescription): boolean =>
  field.required === true || field.nullInItem === true

/** The fields written as null rather than left out when empty. */
export const nullInItem = (resource: ResourceDescription): ReadonlySet<string> =>
  new Set(resource.fields.filter((field) => field.nullInItem).map((field) => field.field))

/** The table's columns, the key's first: the order the bulk loader copies them in. */
export const columnsOf = (resource: ResourceDescription): readonly string[] => [
  ...resource.key,
  ...resource.fields.map((field) => field.column).filter((column) => !resource.key.includes(column)),
]

/** The column of one of the resource's fields; an unknown field is an error, not a new column. */
export function columnOf(resource: ResourceDescription, field: string): string {
  const described = resource.fields.find((candidate) => candidate.field === field)
  if (!described) throw new Error(`${resource.table} has no field ${JSON.stringify(field)}`)
  return described.column
}
