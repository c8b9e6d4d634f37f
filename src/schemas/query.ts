import { z } from 'zod'
import { FIELD_RULES } from './field-rules.js'

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

/**
 * RFC 3339 (5.6) lets `T` and `Z` be written in lower case; the checks and the rest of the API see
 * upper case. Published with the checks (`x-openbook-upper-case`).
 */
export const DATE_TIME_UPPER_CASE = 'tz'

const LOWER_DESIGNATOR = new RegExp(`[${DATE_TIME_UPPER_CASE}]`, 'g')

export const readDateTime: TextReader = (text) =>
  typeof text === 'string' ? text.replace(LOWER_DESIGNATOR, (letter) => letter.toUpperCase()) : text

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

/**
 * What a checked text's schema publishes, beyond its Zod schema: its `format`, the standard
 * `pattern` of the text as sent, the letters read in upper case before the checks, the checks.
 */
interface TextRules {
  readonly format: string
  readonly pattern: string
  readonly upperCase: string
  readonly checks: readonly TextCheck[]
}

const TEXT_RULES = new WeakMap<z.ZodTypeAny, TextRules>()

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
  /** Schema keywords a parameter publishes beyond its Zod schema's, by name: its text checks. */
  readonly published: Readonly<Record<string, Readonly<Record<string, unknown>>>>
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
 * A list's query: the parameters the schema names are read from the query string, checked one by
 * one (every issue reported), then together, then finished. Any other parameter is refused, named
 * in an issue of its own: the contract fixes each list's parameters, and a guessed one (a
 * misspelt filter, an `updatedSince` the API does not have) ignored would answer the whole list
 * as if it had applied.
 */
export function defineQuery<Shape extends z.ZodRawShape, Out>(
  definition: QueryDefinition<Shape, Out>,
): Query<Out> {
  const { schema, readers, check, finish, notBefore } = definition
  const names = Object.keys(schema.shape) as (keyof Shape & string)[]
  const published = Object.fromEntries(
    names.flatMap((name) => {
      const keywords = publishedOf(schema.shape[name])
      return keywords ? [[name, keywords]] : []
    }),
  )
  return {
    schema,
    published,
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
      const unknown = unknownParameters(given, names)
      if (unknown.length > 0)
        return {
          success: false,
          error: new z.ZodError([...(parsed.success ? [] : parsed.error.issues), ...unknown]),
        }
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

/** An issue for each parameter of `given` that is not one of `names`, in the order given. */
function unknownParameters(given: Record<string, unknown>, names: readonly string[]): z.ZodIssue[] {
  return Object.keys(given)
    .filter((name) => !names.includes(name))
    .map((name) => ({
      code: 'unrecognized_keys',
      keys: [name],
      path: [name],
      message: `${name} is not a parameter of this list, which takes ${names.join(', ')}`,
    }))
}

/** `limit` and `offset` alone: the customers list's query. */
export const paginationQuery = defineQuery({
  schema: z.object({ limit: limitParam, offset: offsetParam }),
  readers: PAGINATION_READERS,
  finish: pageOf,
})

/**
 * Every pattern the document publishes as a schema's `pattern` is in the subset that ECMAScript,
 * Python's `re`, Go's RE2 and Java's `Pattern` read alike: no `\p{…}` classes, no lookaround, no
 * back-references, and `[0-9]` rather than `\d` (Python's takes any Unicode digit). The server
 * checks with the same text it publishes.
 *
 * Printable text only: a NUL or control character can never be part of an id. Unicode's control
 * characters (`Cc`) are exactly U+0000-U+001F and U+007F-U+009F, written as `\x` escapes so that
 * the document carries no raw control character.
 */
const PRINTABLE_PATTERN = '^[^\\x00-\\x1f\\x7f-\\x9f]+$'
const PRINTABLE = new RegExp(PRINTABLE_PATTERN)

export function idParam(name: string, description: string) {
  return z
    .string({ invalid_type_error: `${name} must be a string, given once` })
    .min(FIELD_RULES.id.minLength)
    .max(FIELD_RULES.id.maxLength)
    .regex(PRINTABLE, `${name} must not contain control characters`)
    .optional()
    .describe(description)
}

/**
 * A check of a parameter's text, as data: the server runs it (`dateTimeParam`) and the OpenAPI
 * document publishes the same object (`Query.published`), so that a client can refuse what the
 * server refuses, with its words, from the document alone.
 */
export interface TextCheck {
  /** An ECMAScript pattern, without flags, that the text must match (a search, as JSON Schema's). */
  readonly pattern: string
  /** The issue reported when it does not: its code, and for `invalid_string` what was checked. */
  readonly code: 'invalid_string' | 'custom'
  readonly validation?: 'datetime'
  readonly message: string
}

// Zod 3's date-time pattern with offsets, as published since 1.0.0 (a time may omit its seconds):
// each field in range, February's 29th in leap years only.
const CALENDAR_DATE =
  '(([0-9][0-9][2468][048]|[0-9][0-9][13579][26]|[0-9][0-9]0[48]|[02468][048]00|[13579][26]00)-02-29|[0-9]{4}-((0[13578]|1[02])-(0[1-9]|[12][0-9]|3[01])|(0[469]|11)-(0[1-9]|[12][0-9]|30)|(02)-(0[1-9]|1[0-9]|2[0-8])))'
const WALL_CLOCK = '([01][0-9]|2[0-3]):[0-5][0-9](:[0-5][0-9](\\.[0-9]+)?)?'
const dateTimeShape = (t: string, z: string) =>
  `^${CALENDAR_DATE}${t}${WALL_CLOCK}(${z}|([+-][0-9]{2}:?[0-9]{2}))$`

/**
 * RFC 3339 sets no limit on fractional-second digits; nine (nanoseconds) is the finest any common
 * clock or library writes. PostgreSQL refuses a literal with very many of them (a 500 before).
 */
export const MAX_FRACTION_DIGITS = 9

/**
 * What a date-time parameter's text must be, in the order the refusals are reported; every check
 * runs, so a text can fail several.
 *
 * - The shape: RFC 3339 with `Z` or an offset.
 * - A calendar date first, in a year from 0001 (the shape takes 0000; PostgreSQL has no year 0).
 * - An offset, if it ends with one, under 16 hours: Zod's shape takes any two digits (+99:00),
 *   PostgreSQL refuses 16 hours or more. Real time zones span -12:00 to +14:00.
 * - At most `MAX_FRACTION_DIGITS` digits in its first fraction.
 */
export function dateTimeChecks(name: string): readonly TextCheck[] {
  return [
    {
      pattern: dateTimeShape('T', 'Z'),
      code: 'invalid_string',
      validation: 'datetime',
      message: `${name} must be an ISO-8601 date-time with Z or an offset`,
    },
    { pattern: `^(?!0000)${CALENDAR_DATE}`, code: 'custom', message: `${name} is not a calendar date` },
    {
      pattern: '^(?![\\s\\S]*[+-](1[6-9]|[2-9][0-9]):?[0-9]{2}$|[\\s\\S]*[+-][0-9]{2}:?[6-9][0-9]$)',
      code: 'custom',
      message: `${name} must have a UTC offset between -15:59 and +15:59`,
    },
    {
      pattern: `^([^.]|\\.(?![0-9]))*($|\\.[0-9]{1,${MAX_FRACTION_DIGITS}}(?![0-9]))`,
      code: 'custom',
      message: `${name} must have at most ${MAX_FRACTION_DIGITS} fractional-second digits`,
    },
  ]
}

/** Runs `checks` on a string, reporting every one that fails, in order. */
function checkedText(schema: z.ZodString, checks: readonly TextCheck[]) {
  const compiled = checks.map((check) => ({ check, regex: new RegExp(check.pattern) }))
  return schema.superRefine((text, context) => {
    for (const { check, regex } of compiled) {
      if (regex.test(text)) continue
      context.addIssue(
        check.code === 'invalid_string'
          ? { code: 'invalid_string', validation: check.validation ?? 'regex', message: check.message }
          : { code: 'custom', message: check.message },
      )
    }
  })
}

/** What a parameter publishes beyond what its Zod schema says (`Query.published`). */
function publishedOf(schema: z.ZodTypeAny | undefined): Record<string, unknown> | undefined {
  const rules = schema && TEXT_RULES.get(schema)
  if (!rules) return undefined
  return {
    format: rules.format,
    pattern: rules.pattern,
    'x-openbook-upper-case': rules.upperCase,
    'x-openbook-checks': rules.checks,
  }
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

const FRACTION = /\.(\d+)/

/** The instant of a validated date-time in nanoseconds since the epoch, to compare two bounds exactly. */
export function epochNanoseconds(value: string): bigint | undefined {
  const fraction = FRACTION.exec(value)?.[1] ?? ''
  const millis = Date.parse(value.replace(FRACTION, ''))
  if (Number.isNaN(millis)) return undefined
  return BigInt(millis) * 1_000_000n + BigInt(fraction.padEnd(MAX_FRACTION_DIGITS, '0'))
}

/**
 * An RFC 3339 date-time with `Z` or an offset, a real calendar date and at most nine
 * fractional-second digits (`dateTimeChecks`), in upper case (read with `readDateTime`). It may
 * carry more digits than PostgreSQL keeps: bring it to the microsecond with `toMicroseconds`
 * before it reaches SQL, after any comparison.
 */
export function dateTimeParam(name: string, description: string) {
  const checks = dateTimeChecks(name)
  const schema = checkedText(
    z.string({ invalid_type_error: `${name} must be an ISO-8601 date-time, given once` }),
    checks,
  )
    .optional()
    .describe(description)
  TEXT_RULES.set(schema, {
    format: 'date-time',
    // The text as sent, before `readDateTime`: `t` and `z` in either case.
    pattern: dateTimeShape('[Tt]', '[Zz]'),
    upperCase: DATE_TIME_UPPER_CASE,
    checks,
  })
  return schema
}
