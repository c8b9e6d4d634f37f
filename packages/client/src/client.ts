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
import { appointmentsIssues, customersIssues, parameterNames, refuse, type Wire } from './validate.js'

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
    return this.#read(params, options)
  }

  async #read(
    params: CustomerListParams,
    options: PerRequestOptions & { ifNoneMatch?: string },
  ): Promise<Page<Customer> | NotModified> {
    const query = toWire(params, parameterNames('listCustomers'))
    refuse(customersIssues(query))
    const url = this.#transport.url(`${PREFIX.slice(1)}customers`, query)
    return pageOrNotModified<Customer>(await this.#transport.getJson(url, options))
  }

  /** Every active customer, newest first, without a miss: see `AutoPaginator`. */
  all(options: AllOptions = {}): AutoPaginator<Customer> {
    const pageSize = checkPageSize(options.pageSize)
    return new AutoPaginator(
      (stats, paginator) =>
        paginate<Customer>(
          {
            fetchPage: conditionalFetch(
              (offset, limit, request) => this.#read({ offset, limit }, request),
              options,
              paginator,
            ),
            sortKey: (customer) => customer.createdAt,
            id: (customer) => customer.id,
            pageSize,
            resumeFrom: options.resumeFrom,
            seen: options.seen,
          },
          stats,
        ),
      async (etag) =>
        (
          await this.#read(
            { offset: 0, limit: Math.min(100, pageSize + 1) },
            { ifNoneMatch: etag, signal: options.signal },
          )
        ).notModified === true,
    )
  }
}

const APPOINTMENT_PARAMS = parameterNames('listAppointments')

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
    return this.#read(params, options)
  }

  async #read(
    params: AppointmentListParams,
    options: PerRequestOptions & { ifNoneMatch?: string },
  ): Promise<Page<Appointment> | NotModified> {
    const query = toWire(params, APPOINTMENT_PARAMS)
    refuse(appointmentsIssues(query))
    const url = this.#transport.url(`${PREFIX.slice(1)}appointments`, query)
    return pageOrNotModified<Appointment>(await this.#transport.getJson(url, options))
  }

  /** Every active appointment the filters select, latest start first, without a miss: see `AutoPaginator`. */
  all(filters: AppointmentFilters = {}, options: AllOptions = {}): AutoPaginator<Appointment> {
    const pageSize = checkPageSize(options.pageSize)
    // Refused now, before any request, rather than at the first page.
    refuse(
      appointmentsIssues(
        toWire(
          filters,
          APPOINTMENT_PARAMS.filter((name) => name !== 'limit' && name !== 'offset'),
        ),
      ),
    )
    return new AutoPaginator(
      (stats, paginator) =>
        paginate<Appointment>(
          {
            fetchPage: conditionalFetch(
              (offset, limit, request) => this.#read({ ...filters, offset, limit }, request),
              options,
              paginator,
            ),
            sortKey: (appointment) => appointment.start,
            id: (appointment) => appointment.id,
            pageSize,
            resumeFrom: options.resumeFrom,
            seen: options.seen,
          },
          stats,
        ),
      async (etag) =>
        (
          await this.#read(
            { ...filters, offset: 0, limit: Math.min(100, pageSize + 1) },
            { ifNoneMatch: etag, signal: options.signal },
          )
        ).notModified === true,
    )
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
