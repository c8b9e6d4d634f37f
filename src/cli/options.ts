import { InvalidArgumentError } from 'commander'
import { KEY_ENVS, type KeyEnv } from '../domain/api-key-secret.js'
import { type CreateKeyInput, MAX_KEY_LIFETIME_MS } from '../domain/api-keys.js'
import { PLANS, type Plan } from '../domain/plans.js'
import { OperatorError } from '../operator-error.js'

/** Option values checked before the store opens: a command refuses a typo without touching the data. */

const DURATION = /^(\d+)([smhd])$/
const UNIT_MS: Readonly<Record<string, number>> = { s: 1_000, m: 60_000, h: 3_600_000, d: 86_400_000 }

export function parseDuration(text: string): number {
  const match = DURATION.exec(text)
  if (!match)
    throw new OperatorError(`bad duration "${text}": use a number and s, m, h or d (for example 90d)`)
  return Number(match[1]) * (UNIT_MS[match[2] ?? 's'] ?? 1_000)
}

/** Whether YYYY-MM-DD at the start of `text` is a day of the calendar (not 30 February). */
function isCalendarDate(text: string): boolean {
  const [year, month, day] = text.slice(0, 10).split('-').map(Number) as [number, number, number]
  const date = new Date(Date.UTC(year, month - 1, day))
  return date.getUTCFullYear() === year && date.getUTCMonth() === month - 1 && date.getUTCDate() === day
}

/** commander's parser of a whole-number option. */
export function count(name: string) {
  return (value: string): number => {
    if (!/^\d+$/.test(value)) throw new InvalidArgumentError(`${name} must be a whole number`)
    return Number(value)
  }
}

const tooFar = (flag: string, text: string) =>
  new OperatorError(
    `${flag} ${text} is too far: an expiry must lie within 100 years (leave it out for a key that does not expire)`,
  )

/** Refuses a lifetime that is not ahead or lies more than 100 years ahead. */
function checkLifetime(flag: string, text: string, inMs: number): void {
  if (inMs <= 0) throw new OperatorError(`${flag} ${text}: the expiry must be in the future`)
  if (!(inMs <= MAX_KEY_LIFETIME_MS)) throw tooFar(flag, text)
}

function expiryAt(text: string): Date {
  const at = new Date(text)
  if (Number.isNaN(at.getTime()) || !/^\d{4}-\d{2}-\d{2}/.test(text)) {
    throw new OperatorError(`bad --expires-at "${text}": use an ISO-8601 date-time`)
  }
  // Date reads 2027-02-30 as 2 March: a date the calendar does not have is a typo.
  if (!isCalendarDate(text)) throw new OperatorError(`bad --expires-at "${text}": no such date`)
  return at
}

/**
 * The expiry of --expires-in or --expires-at, checked before the store opens: a day that exists,
 * within 100 years. Where it lies is the database's clock's to say (createApiKeys), not this one's.
 */
export function expiryOf(options: { expiresIn?: string; expiresAt?: string }): CreateKeyInput['expiry'] {
  if (options.expiresIn && options.expiresAt)
    throw new OperatorError('give --expires-in or --expires-at, not both')
  if (options.expiresIn) {
    const inMs = parseDuration(options.expiresIn)
    checkLifetime('--expires-in', options.expiresIn, inMs)
    return { inMs }
  }
  if (options.expiresAt) {
    const at = expiryAt(options.expiresAt)
    // Whether it has passed is for the database's clock to say (createApiKeys): this one may be hours off.
    if (!(at.getTime() <= Date.now() + MAX_KEY_LIFETIME_MS)) throw tooFar('--expires-at', options.expiresAt)
    return { at }
  }
  return undefined
}

/** --name and --id of `orgs create`, checked before any SQL (the schema's own limits). */
export function ensureText(flag: string, value: string, max: number): string {
  if (value.trim() === '') throw new OperatorError(`${flag} must not be empty`)
  if ([...value].length > max) throw new OperatorError(`${flag} must be at most ${max} characters`)
  return value
}

/** One value of a closed list, or a refusal that names the list. */
function oneOf<T extends string>(list: readonly T[], value: string, refusal: string): T {
  if (!(list as readonly string[]).includes(value)) throw new OperatorError(refusal)
  return value as T
}

export function ensurePlan(plan: string): Plan {
  return oneOf(PLANS, plan, `bad plan "${plan}": use one of ${PLANS.join(', ')}`)
}

export function ensureEnv(env: string): KeyEnv {
  return oneOf(KEY_ENVS, env, `bad env "${env}": use test or live`)
}

export function ensureEmail(email: string | undefined): string | undefined {
  if (email !== undefined && !/^[^@\s]+@[^@\s]+$/.test(email)) throw new OperatorError(`bad email "${email}"`)
  return email
}
