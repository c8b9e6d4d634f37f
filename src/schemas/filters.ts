import { z } from 'zod'
import { APPOINTMENT, columnOf, type ResourceDescription } from './descriptions.js'
import {
  dateTimeParam,
  defineQuery,
  epochNanoseconds,
  idParam,
  limitParam,
  offsetParam,
  PAGINATION_READERS,
  pageOf,
  readDateTime,
  type TextReader,
  toMicroseconds,
} from './query.js'

/**
 * A list's filters, each described once. Everything else follows from these descriptions: the
 * route's query schema and so the OpenAPI parameters (and from those the client's types and
 * checks), the SQL conditions and the planner steering (queries/appointments.ts), how a total is
 * counted, the plan test's request shapes and data, and the benchmark's parameters.
 *
 * A new filter is one entry here, plus what its `rows` asks for: an index for `few`; for `many`, a
 * migration that adds its column to the lists' definition and creates its index
 * (docs/design/lists.md): the database then keeps a list for every combination of the `many`
 * values, named by them. The plan test then plans it at its busiest and rarest values.
 */
export type FilterDescription = EqualsFilter | BoundFilter

interface FilterBase {
  /** The query parameter. */
  readonly param: string
  /** The resource's field it reads; its column and type come from the resource's description. */
  readonly field: string
  /** The OpenAPI parameter's description. */
  readonly description: string
}

/** The field holds the value. */
export type EqualsFilter = FilterBase & { readonly compare: 'equals' } & (
    | {
        /**
         * One value selects a few of the organization's rows (a person's appointments: up to a few
         * thousand, `FEW_ROWS`): read and counted along `index`, which leads with
         * (org_id, column) and then the list's order. With such a filter given, the others are
         * checked on its rows (planner steering in queries/appointments.ts).
         */
        readonly rows: 'few'
        readonly index: string
      }
    | {
        /**
         * One value may select up to all the organization's rows (a status, a staff member's
         * appointments): the database keeps a list per value, and per combination of values with
         * the other `many` filters, cut into buckets, which counts it and places its deep pages
         * (migration 013, docs/design/lists.md).
         */
        readonly rows: 'many'
      }
  )

/** An inclusive bound on the list's order field, a date-time: the list's buckets count a range. */
export type BoundFilter = FilterBase & { readonly compare: 'from' | 'to'; readonly rows: 'many' }

/**
 * The most rows one value of a `few` filter is built for: its count reads that many index entries.
 * The plan test holds every `few` filter to it on data whose values range up to several times it.
 */
export const FEW_ROWS = 5_000

/** The filters of one list, for one resource, with the list's order field. */
export interface ListFilters {
  readonly resource: ResourceDescription
  /** The field the list is ordered by (descending, then id): what `from`/`to` bound. */
  readonly orderField: string
  readonly filters: readonly FilterDescription[]
}

export const APPOINTMENT_LIST = {
  resource: APPOINTMENT,
  orderField: 'start',
  filters: [
    {
      param: 'status',
      field: 'status',
      compare: 'equals',
      description: 'Only appointments in this status',
      rows: 'many',
    },
    {
      param: 'customerId',
      field: 'customerId',
      compare: 'equals',
      description: 'Only appointments of this customer',
      rows: 'few',
      index: 'appointments_active_customer_idx',
    },
    {
      param: 'staffId',
      field: 'staffId',
      compare: 'equals',
      description: 'Only appointments of this staff member',
      // A staff member of a large salon has ten thousand appointments and more.
      rows: 'many',
    },
    {
      param: 'startDate',
      field: 'start',
      compare: 'from',
      description:
        'Inclusive lower bound on the start time; up to 9 fractional-second digits, compared to the microsecond',
      rows: 'many',
    },
    {
      param: 'endDate',
      field: 'start',
      compare: 'to',
      description:
        'Inclusive upper bound on the start time; up to 9 fractional-second digits, compared to the microsecond',
      rows: 'many',
    },
  ],
} as const satisfies ListFilters

/** The values of a list's filters, by parameter, as its SQL reads them. */
export type FilterValues<List extends ListFilters> = {
  readonly [Param in List['filters'][number]['param']]?: string | undefined
}

/** A query's parameters: paging and the list's filters, checked, read and finished from the descriptions. */
export function listQuery<List extends ListFilters>(list: List) {
  return defineQuery({
    schema: z.object({
      limit: limitParam,
      offset: offsetParam,
      ...Object.fromEntries(list.filters.map((filter) => [filter.param, filterSchema(list, filter)])),
    }),
    readers: { ...PAGINATION_READERS, ...filterReaders(list) },
    check: (values) => checkBounds(list, values),
    notBefore: boundPairs(list),
    finish: ({ limit, offset, ...filters }) => ({
      page: pageOf({ limit, offset }),
      filters: finishFilters(list, filters) as FilterValues<List>,
    }),
  })
}

/** A filter's column, from its resource's description. */
export const filterColumn = (list: ListFilters, filter: FilterDescription): string =>
  columnOf(list.resource, filter.field)

/** The values an `equals` filter on an enumerated field accepts (the field's type), else undefined. */
export function filterValues(list: ListFilters, filter: FilterDescription): readonly string[] | undefined {
  const type = list.resource.fields.find((field) => field.field === filter.field)?.type
  return Array.isArray(type) ? type : undefined
}

/** The query schema of one filter: an enumeration, an id or a date-time, by its field's type. */
export function filterSchema(list: ListFilters, filter: FilterDescription): z.ZodTypeAny {
  if (filter.compare !== 'equals') return dateTimeParam(filter.param, filter.description)
  const values = filterValues(list, filter)
  if (values)
    return z
      .enum(values as [string, ...string[]], {
        invalid_type_error: `${filter.param} must be one of the ${filter.field} values, given once`,
      })
      .optional()
      .describe(filter.description)
  return idParam(filter.param, filter.description)
}

/** The readers of the filters whose text is not their value: date-times in upper case. */
export function filterReaders(list: ListFilters): Record<string, TextReader> {
  return Object.fromEntries(
    list.filters
      .filter((filter) => filter.compare !== 'equals')
      .map((filter) => [filter.param, readDateTime]),
  )
}

/** The upper bounds, each with the lower bound of the same field it must not be before. */
export function boundPairs(list: ListFilters): Record<string, string> {
  const pairs: Record<string, string> = {}
  for (const from of list.filters.filter((filter) => filter.compare === 'from')) {
    const to = list.filters.find((filter) => filter.compare === 'to' && filter.field === from.field)
    if (to) pairs[to.param] = from.param
  }
  return pairs
}

/** A lower and an upper bound of the same field, given together, must not be reversed. */
export function checkBounds(
  list: ListFilters,
  values: Readonly<Record<string, unknown>>,
): { path: string; message: string } | undefined {
  for (const [to, from] of Object.entries(boundPairs(list))) {
    const low = values[from]
    const high = values[to]
    if (typeof low !== 'string' || typeof high !== 'string') continue
    // Compared as sent, to the nanosecond: two bounds within one microsecond are not reversed.
    const start = epochNanoseconds(low)
    const end = epochNanoseconds(high)
    if (start !== undefined && end !== undefined && end < start)
      return { path: to, message: `${to} must not be before ${from}` }
  }
  return undefined
}

/**
 * The filters' values as the SQL reads them: bounds brought to the microsecond, the lower one
 * rounded up and the upper one down, so that each still selects exactly the times it names.
 */
export function finishFilters(
  list: ListFilters,
  values: Readonly<Record<string, unknown>>,
): Record<string, string | undefined> {
  const finished: Record<string, string | undefined> = {}
  for (const filter of list.filters) {
    const value = values[filter.param]
    if (typeof value !== 'string') continue
    finished[filter.param] =
      filter.compare === 'equals' ? value : toMicroseconds(value, filter.compare === 'from' ? 'up' : 'down')
  }
  return finished
}
