import { APPOINTMENT } from '../schemas/descriptions.js'
import type { Sql, StoreAdapter, Tenant } from '../store/types.js'
import {
  fetchPage,
  itemFieldsOf,
  type Page,
  type PageRequest,
  type PageSql,
  type PageStatement,
  pageSql,
} from './page.js'
import { indexCount, organizationCount, tenantCondition, utcMidnight } from './sql.js'

export interface AppointmentFilters {
  readonly status?: string | undefined
  readonly customerId?: string | undefined
  readonly staffId?: string | undefined
  /** Inclusive lower bound on the start time. */
  readonly startDate?: string | undefined
  /** Inclusive upper bound on the start time. */
  readonly endDate?: string | undefined
}

/** An appointment item, in the contract's order: empty fields are left out, the nullable ones written as null. */
const FIELDS = itemFieldsOf(APPOINTMENT)

/** Latest start first; the id breaks ties. */
const ORDER_BY = ['start_at', 'id']

const FILTER_SQL: Readonly<Record<keyof AppointmentFilters, (n: number) => string>> = {
  status: (n) => `k.status = $${n}`,
  customerId: (n) => `k.customer_id = $${n}`,
  staffId: (n) => `k.staff_id = $${n}`,
  startDate: (n) => `k.start_at >= $${n}::timestamptz`,
  endDate: (n) => `k.start_at <= $${n}::timestamptz`,
}
/** Every filter of `AppointmentFilters`, in the order their parameters are numbered. */
export const APPOINTMENT_FILTERS = Object.keys(FILTER_SQL) as readonly (keyof AppointmentFilters)[]

/**
 * The filters `appointment_day_counts` knows (migration 003 counts by status and UTC day). Day
 * counts answer a total only when every filter given is one of these; any other filter, and any
 * filter added later, counts from an index.
 */
const DAY_COUNT_FILTERS: ReadonlySet<keyof AppointmentFilters> = new Set(['status', 'startDate', 'endDate'])

/** The parameter numbers of the filters a request gives. */
type FilterParams = Partial<Record<keyof AppointmentFilters, number>>

/**
 * The list as per-day counts (migration 003) and the part-days at the ends of a date range, when
 * only status and dates filter: the whole days the range covers, each summed over the statuses
 * asked for, and index counts of the part-day after the range's start (before its first whole
 * day) and of the part-day up to its end (from the midnight of its day). `where` is the whole
 * filter on appointments `k`, the range's bounds included.
 */
function dayCountParts(where: string, filters: FilterParams) {
  const { status, startDate, endDate } = filters
  const utc = (n: number) => `($${n}::timestamptz AT TIME ZONE 'UTC')`
  // The first whole day: the start's own when it is midnight, else the next.
  const firstDay = startDate && `(${utc(startDate)} + interval '1 day' - interval '1 microsecond')::date`
  // The day of the end, the first one not whole (an inclusive end at midnight takes its instant only).
  const endDay = endDate && `${utc(endDate)}::date`
  const days = [
    tenantCondition('c'),
    status && `c.status = $${status}`,
    firstDay && `c.day >= ${firstDay}`,
    endDay && `c.day < ${endDay}`,
  ]
    .filter(Boolean)
    .join(' AND ')
  const count = (range: string) => indexCount('appointments', `${where} AND ${range}`, ORDER_BY)
  // Below the first whole day; from the end's day (or the first whole day, if later) up.
  const head = firstDay && {
    // The bucket that ends where the first whole day begins.
    day: `(${firstDay} - 1)`,
    count: count(`k.start_at < ${utcMidnight(firstDay)}`),
  }
  const tailFrom =
    endDay && (firstDay ? `greatest(${utcMidnight(endDay)}, ${utcMidnight(firstDay)})` : utcMidnight(endDay))
  const tail = tailFrom && count(`k.start_at >= ${tailFrom}`)
  return { days, head, tail }
}

/** The exact total: the whole days summed, plus the part-days counted. */
function dayCountsTotal(where: string, filters: FilterParams): string {
  const { days, head, tail } = dayCountParts(where, filters)
  const terms = [`(SELECT coalesce(sum(c.n), 0) FROM appointment_day_counts c WHERE ${days})`]
  if (head) terms.push(head.count)
  if (tail) terms.push(tail)
  return `SELECT (${terms.join(' + ')})::int AS total`
}

/** The list's buckets for a deep page (`PageStatementParts.buckets`): the part-days and the whole days. */
function dayCountBuckets(where: string, filters: FilterParams): string {
  const { days, head, tail } = dayCountParts(where, filters)
  return [
    tail && `SELECT date 'infinity' AS day, ${tail} AS n`,
    `SELECT c.day, sum(c.n) AS n FROM appointment_day_counts c WHERE ${days} GROUP BY c.day`,
    head && `SELECT ${head.day} AS day, ${head.count} AS n`,
  ]
    .filter(Boolean)
    .join(' UNION ALL ')
}

/** The page statement of active appointments of `tenant`, filters combined with AND, latest start first. */
export function appointmentsPage(tenant: Tenant, filters: AppointmentFilters): PageStatement {
  const given = APPOINTMENT_FILTERS.filter((name) => filters[name] !== undefined)
  const params = [tenant, ...given.map((name) => filters[name])]
  // Thirty-two shapes at most, one per set of filters given: each built once.
  const shape = given.join(',')
  let sql = SHAPES.get(shape)
  if (!sql) {
    sql = sqlFor(given)
    SHAPES.set(shape, sql)
  }
  return { ...sql, params }
}

const SHAPES = new Map<string, PageSql>()

/** The page's SQL for the filters given, their parameters numbered from `$2` in that order. */
function sqlFor(given: readonly (keyof AppointmentFilters)[]): PageSql {
  const numbers: FilterParams = {}
  const conditions = [tenantCondition('k'), 'k.is_active']
  const byPerson = given.includes('customerId') || given.includes('staffId')
  given.forEach((name, index) => {
    numbers[name] = index + 2
    // With a person, the person's index is read and the status checked on each of their rows: the
    // status written so leaves the status index no condition to start from. Read instead, that
    // index would yield every appointment of the status to find the person's, each from the heap
    // (the person indexes do not hold the status); the planner's estimates alone chose between them.
    conditions.push(
      name === 'status' && byPerson ? `(k.status = $${index + 2}) IS TRUE` : FILTER_SQL[name](index + 2),
    )
  })
  const where = conditions.join(' AND ')
  // Any other filter counts from its index: a customer's or staff member's appointments are few.
  const dayCountsKnowAll = given.every((name) => DAY_COUNT_FILTERS.has(name))
  return pageSql({
    table: 'appointments',
    where,
    paramCount: given.length + 1,
    orderBy: ORDER_BY,
    fields: FIELDS,
    ...(dayCountsKnowAll
      ? {
          // Unfiltered, one row per organization (migration 006) rather than a row per status and day.
          countText:
            given.length === 0 ? organizationCount('appointment_counts') : dayCountsTotal(where, numbers),
          buckets: dayCountBuckets(where, numbers),
        }
      : {}),
  })
}

/** Active appointments of one organization, filters combined with AND, latest start first. */
export function listAppointments(
  store: StoreAdapter,
  sql: Sql,
  tenant: Tenant,
  page: PageRequest,
  filters: AppointmentFilters,
): Promise<Page> {
  return fetchPage(store, sql, appointmentsPage(tenant, filters), page)
}
