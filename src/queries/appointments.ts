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
import { organizationCount, tenantCondition } from './sql.js'

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
 * The filters the buckets know (migration 009 cuts the list of all active appointments, and each
 * status's, into buckets of at most 2,000 in list order; a date range is a contiguous part of
 * either). The buckets answer a total and place a deep page only when every filter given is one
 * of these; any other filter, and any filter added later, counts from an index.
 */
const BUCKET_FILTERS: ReadonlySet<keyof AppointmentFilters> = new Set(['status', 'startDate', 'endDate'])

/** The parameter numbers of the filters a request gives. */
type FilterParams = Partial<Record<keyof AppointmentFilters, number>>

/**
 * The list as pieces (`PageStatementParts.pieces`) when only status and dates filter: the buckets
 * of the status's list (or of all appointments) from the one the range's start falls in to the
 * one its end falls in. Those two are cut at the range's ends by counting index entries inside
 * them: below the start in the first, up to the end in the last (at most 2,000 each). A bucket's
 * upper end is the next one's bound, so each count runs from a bucket's bound up to a range's end:
 * `bs`/`cs` the start's bucket and the entries of it below the start, `be`/`ce` the end's bucket
 * and the entries of it up to the end.
 */
function bucketPieces(filters: FilterParams): { ctes: string | undefined; pieces: string } {
  const { status, startDate, endDate } = filters
  const list = (alias: string) =>
    `${tenantCondition(alias)} AND ${alias}.list = ${status ? `'appointments:' || $${status}::text` : "'appointments'"}`
  // The list without its date range: what the buckets count.
  const base = [tenantCondition('k'), 'k.is_active', status && `k.status = $${status}`]
    .filter(Boolean)
    .join(' AND ')
  const start = startDate && `$${startDate}::timestamptz`
  const end = endDate && `$${endDate}::timestamptz`
  const bound = (cte: string) => `((SELECT ${cte}.lo_at FROM ${cte}), (SELECT ${cte}.lo_id FROM ${cte}))`
  const bucketOf = (name: string, condition: string) =>
    `${name} AS MATERIALIZED (SELECT c.lo_at, c.lo_id FROM list_buckets c WHERE ${list('c')} AND ${condition}
      ORDER BY c.lo_at DESC, c.lo_id DESC LIMIT 1)`
  // Counted oldest first, from the bucket's bound up: the index scan starts at the bound (a row
  // comparison) and stops at the range's end (a condition on start_at alone). The other way round,
  // a row comparison does not end a scan where its id decides (rows of one instant): it would
  // read every entry of the instant below the bound.
  const countFrom = (name: string, bucket: string, condition: string) =>
    `${name} AS MATERIALIZED (SELECT (SELECT count(*) FROM (
        SELECT FROM appointments k WHERE ${base} AND ${condition} AND (k.start_at, k.id) >= ${bound(bucket)}
        ORDER BY k.start_at, k.id OFFSET 0) k) AS n)`
  const ctes = [
    // The last bucket with entries before the start.
    start && bucketOf('bs', `c.lo_at < ${start}`),
    start && countFrom('cs', 'bs', `k.start_at < ${start}`),
    // The bucket the end falls in.
    end && bucketOf('be', `c.lo_at <= ${end}`),
    end && countFrom('ce', 'be', `k.start_at <= ${end}`),
  ].filter(Boolean)
  const at = (cte: string) => `(c.lo_at, c.lo_id) = ${bound(cte)}`
  let n = 'c.n'
  if (end) n = `(CASE WHEN ${at('be')} THEN (SELECT ce.n FROM ce) ELSE ${n} END)`
  if (start) n = `${n} - (CASE WHEN ${at('bs')} THEN (SELECT cs.n FROM cs) ELSE 0 END)`
  const conditions = [
    list('c'),
    // Before the first bucket, no entry is below the start: the pieces start at the list's bottom.
    start &&
      `(c.lo_at, c.lo_id) >= (coalesce((SELECT bs.lo_at FROM bs), '-infinity'), coalesce((SELECT bs.lo_id FROM bs), ''))`,
    end && `(c.lo_at, c.lo_id) <= ${bound('be')}`,
    start && end && `${start} <= ${end}`,
  ].filter(Boolean)
  // The start's bucket is stepped from the start, the rest from their bounds.
  const from = start
    ? `CASE WHEN ${at('bs')} THEN ${start} ELSE c.lo_at END AS from_at, CASE WHEN ${at('bs')} THEN '' ELSE c.lo_id END AS from_id`
    : 'c.lo_at AS from_at, c.lo_id AS from_id'
  return {
    ctes: ctes.length > 0 ? ctes.join(',\n    ') : undefined,
    pieces: `SELECT c.lo_at, c.lo_id, ${n} AS n, ${from} FROM list_buckets c WHERE ${conditions.join(' AND ')}`,
  }
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
  // Without the range's lower bound, and without its upper bound (PageStatementParts.seekWhere).
  const up: string[] = [...conditions]
  const down: string[] = [...conditions]
  given.forEach((name, index) => {
    numbers[name] = index + 2
    // With a person, the person's index is read and the status checked on each of their rows: the
    // status written so leaves the status index no condition to start from. Read instead, that
    // index would yield every appointment of the status to find the person's, each from the heap
    // (the person indexes do not hold the status); the planner's estimates alone chose between them.
    const condition =
      name === 'status' && byPerson ? `(k.status = $${index + 2}) IS TRUE` : FILTER_SQL[name](index + 2)
    conditions.push(condition)
    if (name !== 'startDate') up.push(condition)
    if (name !== 'endDate') down.push(condition)
  })
  const where = conditions.join(' AND ')
  // Any other filter counts from its index: a customer's or staff member's appointments are few.
  if (!given.every((name) => BUCKET_FILTERS.has(name)))
    return pageSql({
      table: 'appointments',
      where,
      paramCount: given.length + 1,
      orderBy: ORDER_BY,
      fields: FIELDS,
    })
  const { ctes, pieces } = bucketPieces(numbers)
  return pageSql({
    table: 'appointments',
    where,
    paramCount: given.length + 1,
    orderBy: ORDER_BY,
    fields: FIELDS,
    // Unfiltered, one row per organization (migration 006); filtered, the pieces summed.
    countText:
      given.length === 0
        ? organizationCount('appointment_counts')
        : `SELECT coalesce(sum(p.n), 0)::int AS total FROM (${pieces}) p`,
    ...(ctes ? { ctes } : {}),
    pieces,
    seekWhere: { up: up.join(' AND '), down: down.join(' AND ') },
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
