import { APPOINTMENT } from '../schemas/descriptions.js'
import {
  APPOINTMENT_LIST,
  type FilterDescription,
  type FilterValues,
  filterColumn,
} from '../schemas/filters.js'
import type { Tenant } from '../store/types.js'
import { itemFieldsOf, type PageSql, type PageStatement, PENDING_TOTAL, pageSql } from './page-statement.js'
import { tenantCondition } from './sql.js'

/** The filters' values, by parameter (schemas/filters.ts). */
export type AppointmentFilters = FilterValues<typeof APPOINTMENT_LIST>
type FilterName = keyof AppointmentFilters

/** An appointment item, in the contract's order: empty fields are left out, the nullable ones written as null. */
const FIELDS = itemFieldsOf(APPOINTMENT)

/** Latest start first; the id breaks ties. */
const ORDER_BY = ['start_at', 'id']

const FILTERS: readonly FilterDescription[] = APPOINTMENT_LIST.filters

/** A filter's condition on its parameter `$n`, from its description. */
function conditionOf(filter: FilterDescription, n: number): string {
  const column = `k.${filterColumn(APPOINTMENT_LIST, filter)}`
  if (filter.compare === 'from') return `${column} >= $${n}::timestamptz`
  if (filter.compare === 'to') return `${column} <= $${n}::timestamptz`
  return `${column} = $${n}`
}

/** Every filter, in the order their parameters are numbered. */
export const APPOINTMENT_FILTERS = FILTERS.map((filter) => filter.param as FilterName)

/**
 * Whether the buckets answer a total and place a deep page for these filters: every filter is
 * `many`. Migration 013 keeps the list of all active appointments, and the list of each value
 * and each combination of values of the `many` filters, cut into buckets in list order; a date
 * range is a contiguous part of any of them. Any other set, and so any `few` filter, counts from
 * the few filter's index.
 */
function bucketed(given: readonly FilterDescription[]): boolean {
  return given.every((filter) => filter.rows === 'many')
}

/** The filters a request gives, each with its parameter's number. */
interface Numbered {
  readonly filter: FilterDescription
  readonly n: number
}

/** The list's name among the buckets: its `many` values by column ({} for all appointments). */
function listFilters(values: readonly Numbered[]): string {
  if (values.length === 0) return `'{}'::jsonb`
  const members = values.map(({ filter, n }) => `'${filterColumn(APPOINTMENT_LIST, filter)}', $${n}::text`)
  return `jsonb_build_object(${members.join(', ')})`
}

/**
 * The list as pieces (`PageStatementParts.pieces`) when the buckets count it (`bucketed`): the
 * buckets of the values' list (or of all appointments) from the one the range's start falls in to the
 * one its end falls in. Those two are cut at the range's ends by counting index entries inside
 * them, on the side of the end that its time says is the smaller (`cutOf`): at most 2,000 and the
 * pending changes each. `bs`/`cs` are the start's bucket and what its piece leaves out of the
 * bucket's folded count, `be`/`ce` the end's bucket and its piece. `pending` says which of the
 * list's changes the pieces add: those with the values, from the start's cut up to the end's
 * (`cut_at`, `cut_id`), or from the range's start and up to its end where no bucket holds it.
 */
function bucketPieces(given: readonly Numbered[]): {
  ctes: string
  pieces: string
  pending: string
  bottom: string
} {
  const values = given.filter(({ filter }) => filter.compare === 'equals')
  const startDate = given.find(({ filter }) => filter.compare === 'from')?.n
  const endDate = given.find(({ filter }) => filter.compare === 'to')?.n
  const filters = listFilters(values)
  // The buckets name a list by the text of its values (a text equality, which row-level security
  // lets the index seek by); the pending changes are matched by their values, as jsonb.
  const list = (alias: string) =>
    `${tenantCondition(alias)} AND ${alias}.list = 'appointments' AND ${alias}.filters = (${filters})::text`
  // The list without its date range: what the buckets count.
  const base = [
    tenantCondition('k'),
    'k.is_active',
    ...values.map(({ filter, n }) => conditionOf(filter, n)),
  ].join(' AND ')
  const start = startDate && `$${startDate}::timestamptz`
  const end = endDate && `$${endDate}::timestamptz`
  /** A key of a one-row CTE as a row: its bound (`lo`), the next bucket's (`hi`) or its cut. */
  const keyOf = (cte: string, key: 'lo' | 'hi' | 'cut' = 'lo') =>
    `((SELECT ${cte}.${key}_at FROM ${cte}), (SELECT ${cte}.${key}_id FROM ${cte}))`
  /**
   * The bucket an end of the range falls in (the last one whose bound is at or below it, as
   * `condition` says), its folded count `n`, the next bucket's bound (`hi_at`, `hi_id`; above
   * the highest bucket, past every entry), and `above`: whether its entries are counted from the
   * end up to that bound rather than from its own bound up to the end. Each side holds about the
   * share of the bucket's time it spans (the highest bucket's time ends at the list's newest entry,
   * the lowest's begins at its oldest), and the smaller is read; either holds at most the bucket:
   * a range from before the list's first entry to after its last reads two entries. Both ends in
   * one bucket measure it alike, so the start is counted from above only if the end is too.
   * `cut_at`, `cut_id`: where the pending changes that the pieces add begin (the start's) or end
   * (the end's). A piece that is the entries counted (the start's from above, the end's from
   * below) holds its bucket's pending changes already; one that is the bucket's folded count less
   * the entries counted (the start's from below, the end's from above) needs them added.
   */
  const cutOf = (name: string, at: string, condition: string, side: 'start' | 'end') => {
    const epoch = (value: string) => `date_part('epoch', ${value})`
    const entry = (order: 'ASC' | 'DESC') =>
      `(SELECT k.start_at FROM appointments k WHERE ${base} ORDER BY k.start_at ${order}, k.id ${order} LIMIT 1)`
    const top = `coalesce(h.lo_at, ${entry('DESC')})`
    const bottom = `CASE WHEN c.lo_at = '-infinity' THEN ${entry('ASC')} ELSE c.lo_at END`
    // On a tie, the side without the end's own instant, which may hold a crowd: the end's
    // entries at its instant are below it, the start's above it.
    const smallerAbove = `${epoch(top)} - ${epoch(at)} ${side === 'end' ? '<=' : '<'} ${epoch(at)} - ${epoch(bottom)}`
    // OFFSET 0: `above` is computed once, not again in each column that reads it.
    return `${name} AS MATERIALIZED (SELECT c.*, CASE WHEN c.above THEN c.hi_at ELSE c.lo_at END AS cut_at,
        CASE WHEN c.above THEN c.hi_id ELSE c.lo_id END AS cut_id
      FROM (SELECT c.lo_at, c.lo_id, c.n, coalesce(h.lo_at, 'infinity') AS hi_at, coalesce(h.lo_id, '') AS hi_id,
                   coalesce(${smallerAbove}, false) AS above
            FROM (SELECT c.lo_at, c.lo_id, c.n FROM buckets c WHERE ${list('c')} AND ${condition}
                  ORDER BY c.lo_at DESC, c.lo_id DESC LIMIT 1) c
            LEFT JOIN LATERAL (SELECT h.lo_at, h.lo_id FROM buckets h WHERE ${list('h')}
                  AND (h.lo_at, h.lo_id) > (c.lo_at, c.lo_id) ORDER BY h.lo_at, h.lo_id LIMIT 1) h ON true
            OFFSET 0) c)`
  }
  /**
   * The entries of the bucket `bucket` below an end (`below`, a condition on start_at alone):
   * read from the bucket's bound up to the end, or, when the bucket counts the other side
   * (`above`), its folded count less the entries from the next bucket's bound down to the end.
   * Each scan starts at a bound (a row comparison) and stops at the end (a condition on start_at
   * alone): the other way round, a row comparison does not end a scan where its id decides (rows
   * of one instant), and it would read every entry of the instant past it.
   */
  const countIn = (name: string, bucket: string, below: string, notBelow: string) => {
    const entries = (condition: string, order: 'ASC' | 'DESC') =>
      `(SELECT count(*) FROM (SELECT FROM appointments k WHERE ${base} AND ${condition}
          ORDER BY k.start_at ${order}, k.id ${order} OFFSET 0) k)`
    return `${name} AS MATERIALIZED (SELECT CASE WHEN (SELECT ${bucket}.above FROM ${bucket})
        THEN (SELECT ${bucket}.n FROM ${bucket}) - ${entries(`${notBelow} AND (k.start_at, k.id) < ${keyOf(bucket, 'hi')}`, 'DESC')}
        ELSE ${entries(`${below} AND (k.start_at, k.id) >= ${keyOf(bucket)}`, 'ASC')} END AS n)`
  }
  const pendingWhere = [
    'p.delta <> 0',
    // Each value read from the change's values by its column, as text: cheaper than a jsonb
    // containment (docs/design/lists.md). With no values, every change is the list's.
    ...values.map(({ filter, n }) => `p.attrs ->> '${filterColumn(APPOINTMENT_LIST, filter)}' = $${n}::text`),
    start &&
      `(p.at, p.id) >= (coalesce((SELECT bs.cut_at FROM bs), ${start}), coalesce((SELECT bs.cut_id FROM bs), ''))`,
    end &&
      `(CASE WHEN EXISTS (SELECT FROM be) THEN (p.at, p.id) < ${keyOf('be', 'cut')} ELSE p.at <= ${end} END)`,
  ].filter(Boolean)
  const ctes = [
    // The last bucket with entries before the start.
    start && cutOf('bs', start, `c.lo_at < ${start}`, 'start'),
    start && countIn('cs', 'bs', `k.start_at < ${start}`, `k.start_at >= ${start}`),
    // The bucket the end falls in.
    end && cutOf('be', end, `c.lo_at <= ${end}`, 'end'),
    end && countIn('ce', 'be', `k.start_at <= ${end}`, `k.start_at > ${end}`),
  ].filter(Boolean)
  const at = (cte: string) => `(c.lo_at, c.lo_id) = ${keyOf(cte)}`
  let n = 'c.n'
  if (end) n = `(CASE WHEN ${at('be')} THEN (SELECT ce.n FROM ce) ELSE ${n} END)`
  if (start) n = `${n} - (CASE WHEN ${at('bs')} THEN (SELECT cs.n FROM cs) ELSE 0 END)`
  const conditions = [
    list('c'),
    // Before the first bucket, no entry is below the start: the pieces start at the list's bottom.
    start &&
      `(c.lo_at, c.lo_id) >= (coalesce((SELECT bs.lo_at FROM bs), '-infinity'), coalesce((SELECT bs.lo_id FROM bs), ''))`,
    end && `(c.lo_at, c.lo_id) <= ${keyOf('be')}`,
    start && end && `${start} <= ${end}`,
  ].filter(Boolean)
  // The start's bucket is stepped from the start, the rest from their bounds.
  const from = start
    ? `CASE WHEN ${at('bs')} THEN ${start} ELSE c.lo_at END AS from_at, CASE WHEN ${at('bs')} THEN '' ELSE c.lo_id END AS from_id`
    : 'c.lo_at AS from_at, c.lo_id AS from_id'
  return {
    ctes: ctes.join(',\n    '),
    pending: pendingWhere.join(' AND '),
    pieces: `SELECT c.lo_at, c.lo_id, ${n} AS n, ${from} FROM buckets c WHERE ${conditions.join(' AND ')}`,
    bottom: start ? `${start}, ''` : `'-infinity'::timestamptz, ''`,
  }
}

/** The page statement of active appointments of `tenant`, filters combined with AND, latest start first. */
export function appointmentsPage(tenant: Tenant, filters: AppointmentFilters): PageStatement {
  const given = FILTERS.filter((filter) => filters[filter.param as FilterName] !== undefined)
  const params = [tenant, ...given.map((filter) => filters[filter.param as FilterName])]
  // One shape per set of filters given (32 today): each built once.
  const shape = given.map((filter) => filter.param).join(',')
  let sql = SHAPES.get(shape)
  if (!sql) {
    sql = sqlFor(given.map((filter, index) => ({ filter, n: index + 2 })))
    SHAPES.set(shape, sql)
  }
  return { ...sql, params }
}

const SHAPES = new Map<string, PageSql>()

/** The page's SQL for the filters given, their parameters numbered from `$2` in that order. */
function sqlFor(given: readonly Numbered[]): PageSql {
  const conditions = [tenantCondition('k'), 'k.is_active']
  const few = given.some(({ filter }) => filter.rows === 'few')
  // Without the range's lower bound, and without its upper bound (PageStatementParts.seekWhere).
  const up: string[] = [...conditions]
  const down: string[] = [...conditions]
  for (const { filter, n } of given) {
    // With a few filter (a person), its index is read and a many filter's value checked on each of
    // its rows: the condition written so leaves the many filter's index no condition to start
    // from. Read instead, that index would yield every appointment of the status to find the
    // person's, each from the heap (the person indexes do not hold the status); the planner's
    // estimates alone chose between them.
    const condition =
      few && filter.compare === 'equals' && filter.rows === 'many'
        ? `(${conditionOf(filter, n)}) IS TRUE`
        : conditionOf(filter, n)
    conditions.push(condition)
    if (filter.compare !== 'from') up.push(condition)
    if (filter.compare !== 'to') down.push(condition)
  }
  const where = conditions.join(' AND ')
  const paramCount = given.length + 1
  // Any other set counts from an index: a few filter's value selects few rows (FEW_ROWS).
  if (!bucketed(given.map(({ filter }) => filter)))
    return pageSql({ table: 'appointments', where, paramCount, orderBy: ORDER_BY, fields: FIELDS })
  const { ctes, pieces, pending, bottom } = bucketPieces(given)
  return pageSql({
    table: 'appointments',
    where,
    paramCount,
    orderBy: ORDER_BY,
    fields: FIELDS,
    // Exact: the pieces' folded counts and the pending changes among them.
    countText: `SELECT (coalesce(sum(p.n), 0) + ${PENDING_TOTAL})::int AS total FROM (${pieces}) p`,
    ctes,
    pieces,
    pending,
    bottom,
    seekWhere: { up: up.join(' AND '), down: down.join(' AND ') },
  })
}
