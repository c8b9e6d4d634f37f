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

// The API's item schemas, made from the resources' descriptions (descriptions.ts): a field's
// type, nullability, presence and contract text are written there once.

const timestamp = z.string().datetime().describe('ISO-8601 UTC date-time with milliseconds')
const isoDate = z
  .string()
  .regex(/^[0-9]{4}-[0-9]{2}-[0-9]{2}$/)
  .describe('Calendar date, YYYY-MM-DD')

type NamedType = Exclude<FieldType, readonly string[]>

/** The schema of each named field type, as an item carries it. */
const SCHEMAS = {
  id: z.string(),
  text: z.string(),
  timestamp,
  date: isoDate,
  day: isoDate,
  boolean: z.boolean(),
  cents: z.number().int(),
  country: z.string().regex(/^[A-Z]{2}$/),
  currency: z.string().regex(/^[A-Z]{3}$/),
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
