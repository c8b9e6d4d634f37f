// Zod 4 (shipped inside zod 3.25 as zod/v4) validates a record about 2.5 times faster than Zod 3,
// and the import validates a million of them: the rest of the code base still uses Zod 3.
import { z } from 'zod/v4'
import { PLANS, ROLES } from '../domain/plans.js'
import { APPOINTMENT, CUSTOMER, type FieldType, type ResourceDescription } from '../schemas/descriptions.js'
import { FIELD_RULES, type FieldRule } from '../schemas/field-rules.js'
import type { RecordType } from './tables.js'

/** The NDJSON import's record schemas: the API's field names, strict about unknown fields. */
const timestamp = z.iso.datetime({ offset: true })
const id = scalarOf('id')
const text = scalarOf('text')
/** Unknown fields are an error: a typo must not silently drop data. `type` was checked already. */
const record = <Shape extends Record<string, z.ZodType>>(shape: Shape) =>
  z.strictObject({ type: z.string(), ...shape })
const opt = <T extends z.ZodType>(schema: T) => schema.nullable().optional()
/** The UTC calendar day (YYYY-MM-DD) of a date-time with an offset: an appointment's dayKey. */
export const utcDay = (timestamp: string): string => new Date(timestamp).toISOString().slice(0, 10)

/** A field type's check, from its rule (field-rules.ts): what the table's CHECK also enforces. */
function scalarOf(type: Exclude<FieldType, readonly string[]>): z.ZodType {
  const rule: FieldRule = FIELD_RULES[type]
  if (rule.sqlType === 'boolean') return z.boolean()
  if (rule.sqlType === 'integer')
    return z
      .int()
      .min(rule.minimum ?? -2_147_483_648)
      .max(rule.maximum ?? 2_147_483_647)
  let schema = rule.sqlType === 'timestamp with time zone' ? timestamp : z.string()
  if (rule.minLength !== undefined) schema = schema.min(rule.minLength)
  if (rule.maxLength !== undefined) schema = schema.max(rule.maxLength)
  if (rule.pattern !== undefined) schema = schema.regex(new RegExp(rule.pattern), rule.patternMessage)
  return rule.range
    ? schema.refine(within(rule.range), `must be from ${rule.range.from} to ${rule.range.to}`)
    : schema
}

/** Whether a date or a date-time (an instant, its offset applied) lies in `range`. */
function within(range: NonNullable<FieldRule['range']>): (value: string) => boolean {
  const from = Date.parse(range.from)
  const to = Date.parse(range.to)
  return (value) => {
    const instant = Date.parse(value)
    return instant >= from && instant <= to
  }
}

const schemaOf = (type: FieldType): z.ZodType => (typeof type === 'string' ? scalarOf(type) : z.enum(type))

/** The record's own key first (id, orgId): a record without them is reported by them. */
const KEY_FIELDS_FIRST = ['id', 'orgId']
const rank = (field: string) => {
  const at = KEY_FIELDS_FIRST.indexOf(field)
  return at < 0 ? KEY_FIELDS_FIRST.length : at
}

/** A resource's record schema, from its description: a field that is not required may be null or absent. */
function resourceRecord(resource: ResourceDescription) {
  const fields = [...resource.fields].sort((a, b) => rank(a.field) - rank(b.field))
  return record(
    Object.fromEntries(
      fields.map(({ field, type, required }) => [field, required ? schemaOf(type) : opt(schemaOf(type))]),
    ),
  )
}

/** The fields the appointment's own checks read. */
interface AppointmentTimes {
  readonly start: string
  readonly end: string
  dayKey?: string | null
}
const times = (record: Record<string, unknown>) => record as unknown as AppointmentTimes
/** A date-time's instant in milliseconds; NaN for anything else (a value its field check refused). */
const instantOf = (value: unknown) => (typeof value === 'string' ? Date.parse(value) : Number.NaN)

export const RECORD_SCHEMAS = {
  organization: record({
    id,
    name: z.string().min(1).max(200),
    plan: z.enum(PLANS),
    createdAt: opt(timestamp),
  }),
  user: record({ id, email: z.email(), name: opt(text) }),
  membership: record({ orgId: id, userId: id, role: z.enum(ROLES) }),
  staff: record({ id, orgId: id, name: opt(text), isActive: z.boolean().optional() }),
  service: record({ id, orgId: id, name: opt(text), isActive: z.boolean().optional() }),
  customer: resourceRecord(CUSTOMER),
  // The checks below read start and end as instants; one that is no date-time has its own issue
  // already, and they say nothing of it (utcDay would throw on it).
  appointment: resourceRecord(APPOINTMENT)
    .refine((record) => !(instantOf(times(record).end) < instantOf(times(record).start)), {
      message: 'must not be before start',
      path: ['end'],
    })
    // dayKey is the UTC day of start (README): derived when absent, refused when it says otherwise.
    .transform((record, context) => {
      const a = times(record)
      if (Number.isNaN(instantOf(a.start))) return record
      const day = utcDay(a.start)
      if (a.dayKey == null) a.dayKey = day
      else if (a.dayKey !== day) {
        context.addIssue({
          code: 'custom',
          message: `must be the UTC day of start (${day})`,
          path: ['dayKey'],
        })
      }
      return record
    }),
} satisfies Record<RecordType, z.ZodType>
