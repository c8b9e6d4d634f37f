import { z } from 'zod'
import {
  APPOINTMENT,
  CUSTOMER,
  type FieldDescription,
  type FieldType,
  inEveryItem,
  itemFields,
  type ResourceDescription,
} from './descriptions.js'
import { FIELD_RULES, type FieldRule } from './field-rules.js'

// The API's item schemas, made from the resources' descriptions (descriptions.ts): a field's
// type, nullability, presence and contract text are written there once.

const timestamp = z.string().datetime().describe('ISO-8601 UTC date-time with milliseconds')
type NamedType = Exclude<FieldType, readonly string[]>

/** A string type's schema from its rule (field-rules.ts): the OpenAPI document's lengths and pattern. */
function stringOf(type: NamedType, description?: string): z.ZodString {
  const rule: FieldRule = FIELD_RULES[type]
  let schema = z.string()
  if (rule.minLength !== undefined) schema = schema.min(rule.minLength)
  if (rule.maxLength !== undefined) schema = schema.max(rule.maxLength)
  if (rule.pattern !== undefined) schema = schema.regex(new RegExp(rule.pattern))
  return description === undefined ? schema : schema.describe(description)
}

const cents = FIELD_RULES.cents

/** The schema of each named field type, as an item carries it. */
const SCHEMAS = {
  id: stringOf('id'),
  text: stringOf('text'),
  timestamp,
  date: stringOf('date', 'Calendar date, YYYY-MM-DD'),
  day: stringOf('day', 'Calendar date, YYYY-MM-DD'),
  boolean: z.boolean(),
  cents: z.number().int().min(cents.minimum).max(cents.maximum),
  country: stringOf('country'),
  currency: stringOf('currency'),
} as const satisfies Record<NamedType, z.ZodTypeAny>

/** A field's schema as a type: an enumeration's values, or its named type's schema. */
type TypeSchema<T> = T extends readonly [infer First extends string, ...infer Rest extends string[]]
  ? z.ZodEnum<[First, ...Rest]>
  : T extends NamedType
    ? (typeof SCHEMAS)[T]
    : never
type Nullable<F> = F extends { nullInItem: true }
  ? z.ZodNullable<TypeSchema<F['type' & keyof F]>>
  : TypeSchema<F['type' & keyof F]>
/** In every item (`inEveryItem`): NOT NULL, or written as null when empty. */
type FieldSchema<F> = F extends { required: true } | { nullInItem: true }
  ? Nullable<F>
  : z.ZodOptional<Nullable<F>>
type ItemShape<R extends ResourceDescription> = {
  [F in R['fields'][number] as F extends { internal: true } ? never : F['field']]: FieldSchema<F>
}

function fieldSchema(field: FieldDescription): z.ZodTypeAny {
  const { type } = field
  let schema: z.ZodTypeAny = typeof type === 'string' ? SCHEMAS[type] : z.enum(type as [string, ...string[]])
  if (field.about) schema = schema.describe(field.about)
  if (field.nullInItem) schema = schema.nullable()
  return inEveryItem(field) ? schema : schema.optional()
}

/** The strict item schema of `resource`: its item fields, in its order, and nothing else. */
function itemSchemaOf<R extends ResourceDescription>(
  resource: R,
  description: string,
): z.ZodObject<ItemShape<R>, 'strict'> {
  const shape = Object.fromEntries(itemFields(resource).map((field) => [field.field, fieldSchema(field)]))
  return z.object(shape).strict().describe(description) as unknown as z.ZodObject<ItemShape<R>, 'strict'>
}

export const customerSchema = itemSchemaOf(CUSTOMER, 'A customer; optional fields are omitted when empty')
export const appointmentSchema = itemSchemaOf(APPOINTMENT, 'An appointment (reservation, booking)')

export type Customer = z.infer<typeof customerSchema>
export type Appointment = z.infer<typeof appointmentSchema>
