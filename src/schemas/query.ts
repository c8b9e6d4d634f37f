import { z } from 'zod'

/**
 * Query-string building blocks. Values arrive as strings (or arrays when a parameter is repeated,
 * which fails the type check and so is a 400). Each parameter's schema checks the value its
 * `TextReader` makes of the text; the schemas are what the OpenAPI document publishes. None of
 * them preprocesses or transforms (in Zod 3 those cost several times a plain schema's parse, on
 * every request): the reading and the finishing are plain functions (`defineQuery`).
 */

/** Turns a parameter's query-string text into the value its schema checks. */
export type TextReader = (text: unknown) => unknown

const DECIMAL = /^-?[0-9]+$/

/**
 * Decimal digits, with an optional minus, become a number (so that `-1` is refused with the bound,
 * not as a non-number); anything else stays as it is and fails the number check.
 */
export const readInteger: TextReader = (text) =>
  typeof text === 'string' && DECIMAL.test(text) ? Number(text) : text

/** `offset=` and `offset=null` mean 0: the published schema accepts null. */
export const readNullableInteger: TextReader = (text) =>
  text === '' || text === 'null' ? null : readInteger(text)

/** RFC 3339 (5.6) lets `T` and `Z` be written in lower case; the rest of the API sees upper case. */
export const readDateTime: TextReader = (text) =>
  typeof text === 'string' ? text.replace(/[tz]/g, (letter) => letter.toUpperCase()) : text

function integer(name: string, min: number, max: number) {
  return z
    .number({ invalid_type_error: `${name} must be a decimal integer, given once` })
    .int()
    .min(min, `${name} must be at least ${min}`)
    .max(max, `${name} must be at most ${max}`)
}

export const limitParam = integer('limit', 1, 100).default(50).describe('Page size: 1 to 100')

/** Null (read from `offset=` or `offset=null`) is finished as 0 (`pageOf`). */
export const offsetParam = integer('offset', 0, Number.MAX_SAFE_INTEGER)
  .nullable()
  .default(0)
  .describe('Rows to skip; null or empty means 0')

/** How the shared paging parameters are read from their text. */
export const PAGINATION_READERS = { limit: readInteger, offset: readNullableInteger } as const

/** The page a checked query asks for: a null offset is the first row. */
export function pageOf(query: { limit: number; offset: number | null }): { limit: number; offset: number } {
  return { limit: query.limit, offset: query.offset ?? 0 }
}

/** A check that spans parameters found a problem: the message, under the parameter it names. */
export interface CrossIssue {
  readonly path: string
  readonly message: string
}

export type QueryResult<Out> = { success: true; data: Out } | { success: false; error: z.ZodError }

/** A list's query parameters: read from the query string, checked, and published. */
export interface Query<Out> {
  /** What each parameter accepts, as the OpenAPI document publishes it. */
  readonly schema: z.AnyZodObject
  /** Parameters that must not be before another one, by name (endDate → startDate). */
  readonly notBefore?: Readonly<Record<string, string>>
  safeParse(query: unknown): QueryResult<Out>
}

export interface QueryDefinition<Shape extends z.ZodRawShape, Out> {
  readonly schema: z.ZodObject<Shape>
  /** The parameters whose text is not the value their schema checks. */
  readonly readers: Readonly<Partial<Record<keyof Shape, TextReader>>>
  /** Checks that span parameters, run only when every parameter is valid on its own. */
  readonly check?: (value: z.output<z.ZodObject<Shape>>) => CrossIssue | undefined
  /** The values the list reads. */
  readonly finish: (value: z.output<z.ZodObject<Shape>>) => Out
  /** What `check` holds of pairs of parameters, for the document (`Query.notBefore`). */
  readonly notBefore?: Readonly<Record<string, string>>
}

/**
 * A list's query: the parameters the schema names are read from the query string (any other is
 * ignored), checked one by one (every issue reported), then together, then finished.
 */
export function defineQuery<Shape extends z.ZodRawShape, Out>(
  definition: QueryDefinition<Shape, Out>,
): Query<Out> {
  const { schema, readers, check, finish, notBefore } = definition
  const names = Object.keys(schema.shape) as (keyof Shape & string)[]
  return {
    schema,
    ...(notBefore ? { notBefore } : {}),
    safeParse(query) {
      const given = (query ?? {}) as Record<string, unknown>
      const input: Record<string, unknown> = {}
      for (const name of names) {
        const text = Object.hasOwn(given, name) ? given[name] : undefined
        if (text === undefined) continue
        const read = readers[name]
        input[name] = read ? read(text) : text
      }
      const parsed = schema.safeParse(input)
      if (!parsed.success) return parsed
      const issue = check?.(parsed.data)
      if (issue) {
        return {
          success: false,
          error: new z.ZodError([{ code: 'custom', path: [issue.path], message: issue.message }]),
        }
      }
      return { success: true, data: finish(parsed.data) }
    },
  }
}

/** `limit` and `offset` alone: the customers list's query. */
export const paginationQuery = defineQuery({
  schema: z.object({ limit: limitParam, offset: offsetParam }),
  readers: PAGINATION_READERS,
  finish: pageOf,
})

// Printable text only: a NUL or control character can never be part of an id.
const PRINTABLE = /^[^\p{Cc}]+$/u

export function idParam(name: string, description: string) {
  return z
    .string({ invalid_type_error: `${name} must be a string, given once` })
    .min(1)
    .max(128)
    .regex(PRINTABLE, `${name} must not contain control characters`)
    .optional()
    .describe(description)
}

const DAYS_IN_MONTH = [31, 29, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31]

/** Zod's date-time pattern checks each field's range; this adds the calendar (no 30 February). */
function isCalendarDate(value: string): boolean {
  const year = Number(value.slice(0, 4))
  const month = Number(value.slice(5, 7))
  const day = Number(value.slice(8, 10))
  const leap = (year % 4 === 0 && year % 100 !== 0) || year % 400 === 0
  const maxDay = month === 2 && !leap ? 28 : (DAYS_IN_MONTH[month - 1] ?? 0)
  return year >= 1 && day <= maxDay
}

/**
 * Zod's pattern takes any two-digit offset (+99:00); PostgreSQL refuses offsets of 16 hours or
 * more. Real time zones span -12:00 to +14:00.
 */
function hasUsableOffset(value: string): boolean {
  const offset = /[+-](\d{2}):?(\d{2})$/.exec(value)
  return !offset || (Number(offset[1]) <= 15 && Number(offset[2]) <= 59)
}

/**
 * RFC 3339 sets no limit on fractional-second digits; nine (nanoseconds) is the finest any common
 * clock or library writes. PostgreSQL refuses a literal with very many of them (a 500 before).
 */
export const MAX_FRACTION_DIGITS = 9

const FRACTION = /\.(\d+)/

function hasBoundedFraction(value: string): boolean {
  return (FRACTION.exec(value)?.[1]?.length ?? 0) <= MAX_FRACTION_DIGITS
}

/**
 * Which way a bound is brought to the microsecond, PostgreSQL's precision, so that it still means
 * exactly what was sent: start times are stored to the microsecond, so `start >= x` selects what
 * `start >= x rounded up` does, and `start <= x` what `start <= x rounded down` does.
 */
export type BoundRounding = 'up' | 'down'

/**
 * Cuts the fraction to six digits, rounding `up` or `down`. The offset is kept as sent: PostgreSQL
 * applies it, and 9999-12-31T23:59:59-15:00 in UTC would fall in a year JavaScript writes as +010000.
 */
export function toMicroseconds(value: string, rounding: BoundRounding): string {
  const match = /^(.+T\d{2}:\d{2}:\d{2})\.(\d+)(.*)$/.exec(value)
  const [, wallClock = '', digits = '', offset = ''] = match ?? []
  if (!match || digits.length <= 6) return value
  const micros = digits.slice(0, 6)
  if (rounding === 'down' || !/[1-9]/.test(digits.slice(6))) return `${wallClock}.${micros}${offset}`
  if (micros !== '999999') return `${wallClock}.${String(Number(micros) + 1).padStart(6, '0')}${offset}`
  // Up from .999999…: the next whole second on the same wall clock, which may change the day.
  const next = new Date(Date.parse(`${wallClock}Z`) + 1_000).toISOString()
  // After 9999-12-31T23:59:59 on the wall clock (+010000-…): keep .999999, the last representable.
  return next.startsWith('+') ? `${wallClock}.999999${offset}` : `${next.slice(0, 19)}.000000${offset}`
}

/** The instant of a validated date-time in nanoseconds since the epoch, to compare two bounds exactly. */
export function epochNanoseconds(value: string): bigint | undefined {
  const fraction = FRACTION.exec(value)?.[1] ?? ''
  const millis = Date.parse(value.replace(FRACTION, ''))
  if (Number.isNaN(millis)) return undefined
  return BigInt(millis) * 1_000_000n + BigInt(fraction.padEnd(MAX_FRACTION_DIGITS, '0'))
}

/**
 * An RFC 3339 date-time with `Z` or an offset, a real calendar date and at most nine
 * fractional-second digits, in upper case (read with `readDateTime`). It may carry more digits
 * than PostgreSQL keeps: bring it to the microsecond with `toMicroseconds` before it reaches SQL,
 * after any comparison.
 */
export function dateTimeParam(name: string, description: string) {
  return z
    .string({ invalid_type_error: `${name} must be an ISO-8601 date-time, given once` })
    .datetime({ offset: true, message: `${name} must be an ISO-8601 date-time with Z or an offset` })
    .refine(isCalendarDate, `${name} is not a calendar date`)
    .refine(hasUsableOffset, `${name} must have a UTC offset between -15:59 and +15:59`)
    .refine(hasBoundedFraction, `${name} must have at most ${MAX_FRACTION_DIGITS} fractional-second digits`)
    .optional()
    .describe(description)
}
