import { inspect } from 'node:util'
import {
  type AllOptions,
  AutoPaginator,
  checkPageSize,
  conditionalFetch,
  type NotModified,
  type Page,
  pageOrNotModified,
} from './auto-paginator.js'
import { UsageError } from './errors.js'
import type { components, operations } from './generated/api.js'
import { paginate } from './paginate.js'
import {
  type ClientEvent,
  type ConditionalOptions,
  type PerRequestOptions,
  type RetryOptions,
  Transport,
} from './transport.js'
import { type Operation, parameterNames, queryIssues, refuse, type Wire } from './validate.js'

export const CLIENT_VERSION = '1.2.0-dev'

export { type AllOptions, AutoPaginator, type NotModified, type Page } from './auto-paginator.js'

export type Customer = components['schemas']['Customer']
export type Appointment = components['schemas']['Appointment']
export type Pagination = components['schemas']['Pagination']
export type AppointmentStatus = NonNullable<Appointment['status']>

type CustomersQuery = NonNullable<operations['listCustomers']['parameters']['query']>
type AppointmentsQuery = NonNullable<operations['listAppointments']['parameters']['query']>

/** Parameters of `customers.list`. */
export type CustomerListParams = CustomersQuery
/** Parameters of `appointments.list`; `startDate` and `endDate` may also be Dates. */
export type AppointmentListParams = Omit<AppointmentsQuery, 'startDate' | 'endDate'> & {
  startDate?: string | Date
  endDate?: string | Date
}
/** The filters of `appointments.all`: everything but the paging. */
export type AppointmentFilters = Omit<AppointmentListParams, 'limit' | 'offset'>

export interface OpenbookOptions {
  /** `<brand>_test_…` or `<brand>_live_…` and 64 lowercase hex digits. */
  readonly apiKey: string
  /** Where the API is, e.g. `https://api.example.com` or `http://127.0.0.1:3000`. */
  readonly baseUrl: string
  /** Time-out of one attempt, headers and body (default 30 s). */
  readonly timeoutMs?: number
  /** Retries of 5xx, 429, time-outs and connection errors; `false` for none. */
  readonly retry?: RetryOptions | false
  /** A fetch to use instead of the global one (tests, proxies, instrumentation). */
  readonly fetch?: typeof fetch
  /** Added to the User-Agent: your integration's name and version. */
  readonly userAgent?: string
  /** Told about each request, response and retry; the events never hold the key or any payload. */
  readonly onEvent?: (event: ClientEvent) => void
}

const KEY_PATTERN = /^[a-z][a-z0-9]{0,15}_(test|live)_[0-9a-f]{64}$/
const PREFIX = '/api/public/v1/'

const LONE_SURROGATE = /[\uD800-\uDBFF](?![\uDC00-\uDFFF])|(?<![\uD800-\uDBFF])[\uDC00-\uDFFF]/g

/** A parameter's text as the query string carries it; lone surrogates become U+FFFD, as in the URL. */
function wire(value: unknown): string | undefined {
  if (value === undefined || value === null) return undefined
  if (value instanceof Date) return value.toISOString()
  return String(value).replace(LONE_SURROGATE, '\uFFFD')
}

function toWire(params: object, allowed: readonly string[]): Wire {
  const query: Wire = {}
  for (const [name, value] of Object.entries(params)) {
    if (!allowed.includes(name))
      throw new UsageError(`unknown parameter ${JSON.stringify(name)}: expected one of ${allowed.join(', ')}`)
    query[name] = wire(value)
  }
  return query
}

/** One list of the API: the operation that names its parameters and their checks, its path, its order's key. */
interface ListOf<T> {
  readonly operation: Operation
  /** Its query parameters' names (`parameterNames`). */
  readonly params: readonly string[]
  readonly path: string
  readonly sortKey: (item: T) => string
}

const CUSTOMERS: ListOf<Customer> = {
  operation: 'listCustomers',
  params: parameterNames('listCustomers'),
  path: 'customers',
  sortKey: (customer) => customer.createdAt,
}
const APPOINTMENTS: ListOf<Appointment> = {
  operation: 'listAppointments',
  params: parameterNames('listAppointments'),
  path: 'appointments',
  sortKey: (appointment) => appointment.start,
}

type ReadOptions = PerRequestOptions & { ifNoneMatch?: string }

/** One page of `list`, its parameters refused before any request where the server would refuse them. */
async function readPage<T>(
  transport: Transport,
  list: ListOf<T>,
  params: object,
  options: ReadOptions,
): Promise<Page<T> | NotModified> {
  const query = toWire(params, list.params)
  refuse(queryIssues(list.operation, query))
  const url = transport.url(`${PREFIX.slice(1)}${list.path}`, query)
  return pageOrNotModified<T>(await transport.getJson(url, options))
}

/**
 * Every row of `list` that `filters` select, without a miss: see `AutoPaginator`. The filters
 * are refused now, before any request, rather than at the first page.
 */
function everyRow<T extends { id: string }>(
  transport: Transport,
  list: ListOf<T>,
  filters: object,
  options: AllOptions,
): AutoPaginator<T> {
  const pageSize = checkPageSize(options.pageSize)
  const filterNames = list.params.filter((name) => name !== 'limit' && name !== 'offset')
  refuse(queryIssues(list.operation, toWire(filters, filterNames)))
  const read = (offset: number, limit: number, request: ReadOptions) =>
    readPage<T>(transport, list, { ...filters, offset, limit }, request)
  return new AutoPaginator(
    (stats, paginator) =>
      paginate<T>(
        {
          fetchPage: conditionalFetch(read, options, paginator),
          sortKey: list.sortKey,
          id: (item) => item.id,
          pageSize,
          resumeFrom: options.resumeFrom,
          seen: options.seen,
        },
        stats,
      ),
    async (etag) =>
      (await read(0, Math.min(100, pageSize + 1), { ifNoneMatch: etag, signal: options.signal }))
        .notModified === true,
  )
}

class Customers {
  readonly #transport: Transport
  constructor(transport: Transport) {
    this.#transport = transport
  }

  /**
   * One page of active customers, newest first (createdAt descending, then id descending). With
   * `ifNoneMatch` (a page's `etag`), NotModified when that page has not changed.
   */
  list(params: CustomerListParams, options: ConditionalOptions): Promise<Page<Customer> | NotModified>
  list(params?: CustomerListParams, options?: PerRequestOptions): Promise<Page<Customer>>
  list(
    params: CustomerListParams = {},
    options: PerRequestOptions = {},
  ): Promise<Page<Customer> | NotModified> {
    return readPage(this.#transport, CUSTOMERS, params, options)
  }

  /** Every active customer, newest first, without a miss: see `AutoPaginator`. */
  all(options: AllOptions = {}): AutoPaginator<Customer> {
    return everyRow(this.#transport, CUSTOMERS, {}, options)
  }
}

class Appointments {
  readonly #transport: Transport
  constructor(transport: Transport) {
    this.#transport = transport
  }

  /**
   * One page of active appointments, latest start first (start descending, then id descending).
   * With `ifNoneMatch` (a page's `etag`), NotModified when that page has not changed.
   */
  list(params: AppointmentListParams, options: ConditionalOptions): Promise<Page<Appointment> | NotModified>
  list(params?: AppointmentListParams, options?: PerRequestOptions): Promise<Page<Appointment>>
  list(
    params: AppointmentListParams = {},
    options: PerRequestOptions = {},
  ): Promise<Page<Appointment> | NotModified> {
    return readPage(this.#transport, APPOINTMENTS, params, options)
  }

  /** Every active appointment the filters select, latest start first, without a miss: see `AutoPaginator`. */
  all(filters: AppointmentFilters = {}, options: AllOptions = {}): AutoPaginator<Appointment> {
    return everyRow(this.#transport, APPOINTMENTS, filters, options)
  }
}

/**
 * The openbook public API: `customers` and `appointments`, each with `list` (one page) and
 * `all` (every row, without a miss).
 *
 * The API key is kept in a private field: it goes into the Authorization header and nowhere
 * else, not into errors, events, `JSON.stringify(client)` or `util.inspect(client)`.
 */
export class Openbook {
  readonly customers: Customers
  readonly appointments: Appointments
  readonly #baseUrl: string

  constructor(options: OpenbookOptions) {
    const { apiKey, baseUrl } = options
    if (typeof apiKey !== 'string' || !KEY_PATTERN.test(apiKey))
      throw new UsageError(
        'apiKey must be an openbook API key: <brand>_test_ or <brand>_live_ followed by 64 lowercase hex digits',
      )
    let base: URL
    try {
      base = new URL(baseUrl)
    } catch {
      throw new UsageError('baseUrl must be an absolute http or https URL')
    }
    if (base.protocol !== 'http:' && base.protocol !== 'https:')
      throw new UsageError('baseUrl must be an absolute http or https URL')
    if (base.username || base.password) throw new UsageError('baseUrl must not carry credentials')
    base.search = ''
    base.hash = ''
    if (!base.pathname.endsWith('/')) base.pathname += '/'
    this.#baseUrl = base.href
    const timeoutMs = options.timeoutMs ?? 30_000
    if (!Number.isFinite(timeoutMs) || timeoutMs <= 0)
      throw new UsageError('timeoutMs must be a positive number')
    const retry = options.retry === false ? { maxAttempts: 1 } : (options.retry ?? {})
    for (const [name, value] of Object.entries(retry))
      if (typeof value !== 'number' || Number.isNaN(value) || value < 0)
        throw new UsageError(`retry.${name} must be a number, 0 or more`)
    const fetchImpl = options.fetch ?? globalThis.fetch
    if (typeof fetchImpl !== 'function')
      throw new UsageError('no fetch: pass one, or run on Node 20 or later')
    const transport = new Transport({
      apiKey,
      baseUrl: this.#baseUrl,
      timeoutMs,
      retry: {
        maxAttempts: Math.max(1, Math.floor(retry.maxAttempts ?? 4)),
        baseDelayMs: retry.baseDelayMs ?? 250,
        maxDelayMs: retry.maxDelayMs ?? 8_000,
        maxElapsedMs: retry.maxElapsedMs ?? 60_000,
      },
      fetch: fetchImpl,
      userAgent: [`openbook-client/${CLIENT_VERSION}`, `node/${process.versions.node}`, options.userAgent]
        .filter(Boolean)
        .join(' '),
      onEvent: options.onEvent,
      random: Math.random,
    })
    this.customers = new Customers(transport)
    this.appointments = new Appointments(transport)
  }

  get baseUrl(): string {
    return this.#baseUrl
  }

  toJSON(): { baseUrl: string } {
    return { baseUrl: this.#baseUrl }
  }

  [inspect.custom](): string {
    return `Openbook { baseUrl: ${JSON.stringify(this.#baseUrl)} }`
  }
}
