import { z } from 'zod'
import { PLANS, ROLES } from '../domain/plans.js'
import {
  APPOINTMENT_STATUSES,
  CONTACT_METHODS,
  LOCATION_TYPES,
  PAYMENT_KINDS,
  PAYMENT_STATUSES,
} from '../schemas/resources.js'
import type { RecordType } from '../store/bulk.js'

/** The NDJSON import's record schemas: the API's field names, strict about unknown fields. */
const id = z.string().min(1).max(128)
const text = z.string().max(10_000)
const timestamp = z.string().datetime({ offset: true })
const date = z.string().regex(/^\d{4}-\d{2}-\d{2}$/, 'must be YYYY-MM-DD')
const cents = z.number().int().min(0).max(2_147_483_647)
/** Unknown fields are an error: a typo must not silently drop data. */
const record = <Shape extends z.ZodRawShape>(shape: Shape) => z.object(shape).strict()
const opt = <T extends z.ZodTypeAny>(schema: T) => schema.nullable().optional()

export const RECORD_SCHEMAS = {
  organization: record({
    id,
    name: z.string().min(1).max(200),
    plan: z.enum(PLANS),
    createdAt: opt(timestamp),
  }),
  user: record({ id, email: z.string().email(), name: opt(text) }),
  membership: record({ orgId: id, userId: id, role: z.enum(ROLES) }),
  staff: record({ id, orgId: id, name: opt(text), isActive: z.boolean().optional() }),
  service: record({ id, orgId: id, name: opt(text), isActive: z.boolean().optional() }),
  customer: record({
    id,
    orgId: id,
    supportId: opt(text),
    firstName: opt(text),
    lastName: opt(text),
    displayName: opt(text),
    email: opt(text),
    phone: opt(text),
    primaryPhone: opt(text),
    secondaryPhone: opt(text),
    preferredContactMethod: opt(z.enum(CONTACT_METHODS)),
    dateOfBirth: opt(date),
    gender: opt(text),
    notes: opt(text),
    marketingConsent: opt(z.boolean()),
    addressLine1: opt(text),
    city: opt(text),
    region: opt(text),
    postalCode: opt(text),
    country: opt(z.string().regex(/^[A-Z]{2}$/, 'must be an ISO 3166-1 alpha-2 code')),
    preferredStaffId: opt(id),
    isActive: z.boolean(),
    createdAt: timestamp,
    updatedAt: timestamp,
  }),
  appointment: record({
    id,
    orgId: id,
    start: timestamp,
    end: timestamp,
    customerId: opt(id),
    staffId: opt(id),
    serviceId: opt(id),
    status: z.enum(APPOINTMENT_STATUSES),
    locationType: opt(z.enum(LOCATION_TYPES)),
    resourceId: opt(id),
    priceCents: opt(cents),
    currency: opt(z.string().regex(/^[A-Z]{3}$/, 'must be an ISO 4217 code')),
    note: opt(text),
    paymentStatus: opt(z.enum(PAYMENT_STATUSES)),
    amountPaidCents: opt(cents),
    paymentKind: opt(z.enum(PAYMENT_KINDS)),
    paymentId: opt(id),
    invoiceId: opt(id),
    requiresPayment: opt(z.boolean()),
    confirmedAfterPayment: opt(z.boolean()),
    dayKey: opt(date),
    isActive: z.boolean(),
    createdAt: timestamp,
    updatedAt: timestamp,
  }).refine((a) => Date.parse(a.end) >= Date.parse(a.start), {
    message: 'must not be before start',
    path: ['end'],
  }),
} satisfies Record<RecordType, z.ZodTypeAny>

/** API field name → column name, where they differ by more than camelCase. */
const COLUMN_OF: Readonly<Record<string, string>> = { start: 'start_at', end: 'end_at' }

/** Field names are the schemas' (unknown ones are refused first), so the cache stays small. */
const columnCache = new Map<string, string>()

function snake(name: string): string {
  let column = columnCache.get(name)
  if (column === undefined) {
    column = COLUMN_OF[name] ?? name.replace(/[A-Z]/g, (c) => `_${c.toLowerCase()}`)
    columnCache.set(name, column)
  }
  return column
}

export function toRow(record: Record<string, unknown>): Record<string, unknown> {
  const row: Record<string, unknown> = {}
  for (const key in record) row[snake(key)] = record[key]
  return row
}
