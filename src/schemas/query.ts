import { z } from 'zod'

/**
 * Query-string building blocks. Values arrive as strings (or arrays when a
 * parameter is repeated, which fails the type check and so is a 400).
 */

const DECIMAL = /^[0-9]+$/

/** Plain decimal digits become a number; anything else stays as it is and fails the number check. */
function decimal(value: unknown): unknown {
  return typeof value === 'string' && DECIMAL.test(value) ? Number(value) : value
}

function integerMessage(name: string) {
  return { invalid_type_error: `${name} must be a decimal integer, given once` }
}

export const limitParam = z.preprocess(
  decimal,
  z.number(integerMessage('limit')).int().min(1).max(100).default(50).describe('Page size: 1 to 100'),
)

/** `offset=` and `offset=null` mean 0: the published schema accepts null. */
export const offsetParam = z
  .preprocess(
    (value) => (value === '' || value === 'null' ? null : decimal(value)),
    z
      .number(integerMessage('offset'))
      .int()
      .min(0)
      .max(Number.MAX_SAFE_INTEGER)
      .nullable()
      .default(0)
      .describe('Rows to skip; null or empty means 0'),
  )
  .transform((value) => value ?? 0)

export const paginationQuery = z.object({ limit: limitParam, offset: offsetParam })

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

export function dateTimeParam(name: string, description: string) {
  return z
    .string({ invalid_type_error: `${name} must be an ISO-8601 date-time, given once` })
    .datetime({ offset: true, message: `${name} must be an ISO-8601 date-time with Z or an offset` })
    .refine(isCalendarDate, `${name} is not a calendar date`)
    .refine(hasUsableOffset, `${name} must have a UTC offset between -15:59 and +15:59`)
    .optional()
    .describe(description)
}
