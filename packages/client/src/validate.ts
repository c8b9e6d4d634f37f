import { InvalidParametersError, type ValidationIssue } from './errors.js'
import { QUERY_PARAMETERS } from './generated/api.js'

/**
 * The server's query validation, redone here so that a bad parameter is refused before any
 * request, with the server's own words: the same issues in the same order, and the same joined
 * message. What each parameter accepts comes from the server's OpenAPI document
 * (`QUERY_PARAMETERS`, generated with the types); the words are the server's (src/schemas/). A
 * date-time's checks are the document's own (`x-openbook-checks`, each a pattern and the issue it
 * reports), applied as they come; only the comparison of two bounds is written here.
 * Values are checked as the server receives them: as the query string's text.
 */

export type Operation = keyof typeof QUERY_PARAMETERS
type ParameterCheck = (typeof QUERY_PARAMETERS)[Operation][number]

/** The query parameters of an operation, in the document's order. */
export const parameterNames = (operation: Operation): readonly string[] =>
  QUERY_PARAMETERS[operation].map((parameter) => parameter.name)

const statusParameter = QUERY_PARAMETERS.listAppointments.find((parameter) => parameter.name === 'status')
export const APPOINTMENT_STATUSES = statusParameter?.kind === 'enum' ? statusParameter.values : []
export type AppointmentStatus = (typeof APPOINTMENT_STATUSES)[number]

const DECIMAL = /^-?[0-9]+$/

/** A parameter as it travels: the text of the query string, or absent. */
export type Wire = Record<string, string | undefined>

function integer(
  name: string,
  raw: string | undefined,
  min: number,
  max: number,
  nullable: boolean,
): ValidationIssue[] {
  const issues: ValidationIssue[] = []
  if (raw === undefined || (nullable && (raw === '' || raw === 'null'))) return issues
  if (!DECIMAL.test(raw)) {
    issues.push({
      code: 'invalid_type',
      expected: 'number',
      received: 'string',
      path: [name],
      message: `${name} must be a decimal integer, given once`,
    })
    return issues
  }
  const value = Number(raw)
  // Hundreds of digits make Infinity, which Zod's integer check refuses before the bounds (as an
  // invalid type, so in the words of the type error).
  if (!Number.isInteger(value))
    issues.push({
      code: 'invalid_type',
      expected: 'integer',
      received: 'float',
      message: `${name} must be a decimal integer, given once`,
      path: [name],
    })
  if (value < min)
    issues.push({
      code: 'too_small',
      minimum: min,
      type: 'number',
      inclusive: true,
      exact: false,
      message: `${name} must be at least ${min}`,
      path: [name],
    })
  if (value > max)
    issues.push({
      code: 'too_big',
      maximum: max,
      type: 'number',
      inclusive: true,
      exact: false,
      message: `${name} must be at most ${max}`,
      path: [name],
    })
  return issues
}

function string(
  name: string,
  raw: string | undefined,
  minLength: number,
  maxLength: number,
  pattern: string | undefined,
): ValidationIssue[] {
  const issues: ValidationIssue[] = []
  if (raw === undefined) return issues
  if (raw.length < minLength)
    issues.push({
      code: 'too_small',
      minimum: minLength,
      type: 'string',
      inclusive: true,
      exact: false,
      message: `String must contain at least ${minLength} character(s)`,
      path: [name],
    })
  if (raw.length > maxLength)
    issues.push({
      code: 'too_big',
      maximum: maxLength,
      type: 'string',
      inclusive: true,
      exact: false,
      message: `String must contain at most ${maxLength} character(s)`,
      path: [name],
    })
  // The one pattern the server publishes: printable text, no control characters.
  if (pattern !== undefined && !new RegExp(pattern, 'u').test(raw))
    issues.push({
      validation: 'regex',
      code: 'invalid_string',
      message: `${name} must not contain control characters`,
      path: [name],
    })
  return issues
}

type DateTimeCheck = Extract<ParameterCheck, { kind: 'dateTime' }>

const patterns = new Map<string, RegExp>()

/** A published pattern, compiled once. */
function compiled(pattern: string, flags = ''): RegExp {
  const key = `${flags}/${pattern}`
  let regex = patterns.get(key)
  if (!regex) {
    regex = new RegExp(pattern, flags)
    patterns.set(key, regex)
  }
  return regex
}

/** The text as the server checks it: the published letters (`t`, `z`) in upper case. */
function read(check: DateTimeCheck, raw: string): string {
  const letters: string = check.upperCase
  if (letters === '') return raw
  return raw.replace(compiled(`[${letters}]`, 'g'), (letter) => letter.toUpperCase())
}

/** Every published check the text fails, in the published order, as the server reports it. */
function dateTime(check: DateTimeCheck, raw: string | undefined): ValidationIssue[] {
  if (raw === undefined) return []
  const value = read(check, raw)
  return check.checks
    .filter(({ pattern }) => !compiled(pattern).test(value))
    .map(({ code, message, ...rest }) => ({
      code,
      ...('validation' in rest ? { validation: rest.validation } : {}),
      message,
      path: [check.name],
    }))
}

/**
 * The instant of a checked date-time (as `read`) in nanoseconds since the epoch, so that two
 * bounds compare exactly: JavaScript's dates stop at the millisecond.
 */
function epochNanoseconds(value: string): bigint | undefined {
  const fraction = /\.(\d+)/.exec(value)?.[1] ?? ''
  const millis = Date.parse(value.replace(/\.\d+/, ''))
  if (Number.isNaN(millis)) return undefined
  return BigInt(millis) * 1_000_000n + BigInt(fraction.padEnd(9, '0'))
}

function oneOf(name: string, raw: string | undefined, values: readonly string[]): ValidationIssue[] {
  const issues: ValidationIssue[] = []
  if (raw === undefined || values.includes(raw)) return issues
  const message = `Invalid enum value. Expected ${values.map((s) => `'${s}'`).join(' | ')}, received '${raw}'`
  issues.push({ received: raw, code: 'invalid_enum_value', options: [...values], path: [name], message })
  return issues
}

function parameterIssues(check: ParameterCheck, raw: string | undefined): ValidationIssue[] {
  switch (check.kind) {
    case 'integer':
      return integer(check.name, raw, check.minimum, check.maximum, check.nullable)
    case 'enum':
      return oneOf(check.name, raw, check.values)
    case 'dateTime':
      return dateTime(check, raw)
    case 'string':
      return string(
        check.name,
        raw,
        check.minLength,
        check.maxLength,
        'pattern' in check ? check.pattern : undefined,
      )
  }
}

/** The issues the server would report for an operation's query, in its order. */
export function queryIssues(operation: Operation, query: Wire): ValidationIssue[] {
  const checks: readonly ParameterCheck[] = QUERY_PARAMETERS[operation]
  const issues = checks.flatMap((check) => parameterIssues(check, query[check.name]))
  // Bounds are checked together only once every parameter is valid on its own.
  if (issues.length > 0) return issues
  for (const check of checks) {
    if (check.kind !== 'dateTime' || !('notBefore' in check)) continue
    const bound = checks.find((other) => other.name === check.notBefore)
    const low = query[check.notBefore]
    const high = query[check.name]
    if (!low || !high || bound?.kind !== 'dateTime') continue
    const start = epochNanoseconds(read(bound, low))
    const end = epochNanoseconds(read(check, high))
    if (start !== undefined && end !== undefined && end < start)
      issues.push({
        code: 'custom',
        path: [check.name],
        message: `${check.name} must not be before ${check.notBefore}`,
      })
  }
  return issues
}

/** The server's one-line summary of the issues. */
export function issuesMessage(issues: readonly ValidationIssue[]): string {
  return issues.map((issue) => `${issue.path.join('.') || 'query'}: ${issue.message}`).join('; ')
}

/** Throws the server's 400, locally, when there are issues. */
export function refuse(issues: readonly ValidationIssue[]): void {
  if (issues.length === 0) return
  throw new InvalidParametersError({
    status: 400,
    error: 'Invalid query parameters',
    message: issuesMessage(issues),
    code: 'invalid_query',
    details: issues,
  })
}
