import { inspect } from 'node:util'
import { UsageError } from './errors.js'
import type { components, operations } from './generated/api.js'
import { type AutoPage, type Cursor, type PaginationStats, paginate, type RawPage } from './paginate.js'
import {
  type ClientEvent,
  type ConditionalOptions,
  type JsonAnswer,
  type PerRequestOptions,
  type RetryOptions,
  Transport,
} from './transport.js'
import { appointmentsIssues, customersIssues, parameterNames, refuse, type Wire } from './validate.js'

export const CLIENT_VERSION = '1.0.0'

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

/** One page of `list`: the rows, the pagination, the server's request id, the page's ETag and the key's expiry. */
export interface Page<T> {
  readonly data: T[]
  readonly pagination: Pagination
  readonly requestId: string | undefined
  /**
   * The page's validator: it changes whenever anything in the organization's list could change
   * the page or its total. Pass it as `ifNoneMatch` to ask again at the cost of a 304.
   */
  readonly etag: string | undefined
  readonly notModified?: false
  /**
   * When the API key stops working (the server's Openbook-Key-Expires); undefined for a key without
   * an expiry. Rotate the key before then: after it, every request fails with `KeyExpiredError`.
   */
  readonly keyExpiresAt: Date | undefined
  /**
   * The key's organization, as the server names it on every answer (Openbook-Organization): whose
   * rows these are. Ids are unique within an organization only: a copy of several keys' lists
   * keys its rows by (organizationId, id). Undefined from a server that does not send it.
   */
  readonly organizationId: string | undefined
}

/** The answer to a conditional `list` whose page has not changed since the ETag sent (HTTP 304). */
export interface NotModified {
  readonly notModified: true
  readonly etag: string | undefined
  readonly requestId: string | undefined
  readonly keyExpiresAt: Date | undefined
  readonly organizationId: string | undefined
}

/** A page, or NotModified for a 304. */
function pageOrNotModified<T>(answer: JsonAnswer): Page<T> | NotModified {
  const { requestId, etag, keyExpiresAt, organizationId } = answer
  if (answer.status === 304) return { notModified: true, etag, requestId, keyExpiresAt, organizationId }
  const body = answer.body as { data: T[]; pagination: Pagination }
  return { ...body, requestId, etag, keyExpiresAt, organizationId }
}

export interface AllOptions extends Pick<PerRequestOptions, 'signal'> {
  /** New rows per request when nothing changes meanwhile: 1 to 99, default 99 (pages of 100). */
  readonly pageSize?: number
  /** Go on from a page's `cursor`, saved by an earlier iteration over the same list. */
  readonly resumeFrom?: Cursor | undefined
  /**
   * With `resumeFrom`: the ids the iteration yielded before, so that a row moved since is not
   * yielded twice across the resume (openbook-sync passes them from its ids file).
   */
  readonly seen?: Iterable<string> | undefined
  /**
   * The `etag` of an earlier iteration over the same list with the same filters and page size:
   * when nothing in the list has changed since, the first request is answered 304, the iteration
   * yields nothing and `notModified` is true (one request for an unchanged list).
   */
  readonly ifNoneMatch?: string | undefined
}

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

function checkPageSize(pageSize: number | undefined): number {
  const size = pageSize ?? 99
  if (!Number.isInteger(size) || size < 1 || size > 99)
    throw new UsageError(`pageSize must be an integer from 1 to 99, got ${String(pageSize)}`)
  return size
}

/**
 * Auto-pagination over a list: iterate it for rows, or call `pages()` for pages of rows.
 *
 * Guarantee: every row that stays active (and keeps its sort key) for the whole iteration is
 * yielded exactly once, in the list's order, whatever is inserted, deactivated or reactivated
 * meanwhile; no row is yielded twice. Each request overlaps the previous page by one row to
 * check that it continues right after the last row seen; when it does not, the page is read
 * again from further back. Rows inserted or reactivated behind the cursor are not yielded.
 */
export class AutoPaginator<T> implements AsyncIterable<T> {
  /** Requests, re-reads, duplicates dropped and rows yielded so far. */
  readonly stats: PaginationStats = { requests: 0, rereads: 0, duplicates: 0, rows: 0, moved: 0 }
  /**
   * The ETag of the list's first page as this iteration read it, at its start: the list as a
   * whole had not changed since then exactly while a request with it as `ifNoneMatch` is
   * answered 304. Undefined until the first page (and when resuming from a cursor).
   */
  etag: string | undefined
  /** True when the first request, conditional (`ifNoneMatch`), was answered 304: nothing was yielded. */
  notModified = false
  /**
   * The key's expiry as the latest answer gave it (a 304 too); undefined for a key without one, or
   * before the first request. Check it in a nightly job whose lists are unchanged for weeks.
   */
  keyExpiresAt: Date | undefined
  /** The key's organization as the latest answer named it (a 304 too): whose rows these are. */
  organizationId: string | undefined
  readonly #start: (stats: PaginationStats, paginator: AutoPaginator<T>) => AsyncGenerator<AutoPage<T>>
  readonly #recheck: (etag: string) => Promise<boolean>

  constructor(
    start: (stats: PaginationStats, paginator: AutoPaginator<T>) => AsyncGenerator<AutoPage<T>>,
    recheck: (etag: string) => Promise<boolean> = async () => false,
  ) {
    this.#start = start
    this.#recheck = recheck
  }

  /**
   * Whether the list has not changed at all since this iteration read its first page (one request:
   * that page asked again with `etag`, answered 304). True after an iteration that ran to its end
   * means it read a list that did not change under it: the rows it did not yield are not in the
   * list. That is what makes a deletion exact: a row missing from an iteration during which the
   * list changed may only have moved (its sort key changed), so keep it and ask again next time.
   * False without an `etag` (an iteration resumed from a cursor, or a server that sent none).
   */
  async unchanged(): Promise<boolean> {
    if (this.etag === undefined) return false
    this.stats.requests++
    return this.#recheck(this.etag)
  }

  /** Whole pages of rows not yielded before. */
  pages(): AsyncGenerator<AutoPage<T>> {
    return this.#start(this.stats, this)
  }

  async *[Symbol.asyncIterator](): AsyncGenerator<T> {
    for await (const page of this.pages()) yield* page.data
  }

  /** Every row, in order, in one array. */
  async toArray(): Promise<T[]> {
    const rows: T[] = []
    for await (const row of this) rows.push(row)
    return rows
  }
}

/**
 * `fetchPage` of auto-pagination over `list`: the first request of an iteration that starts at the
 * top carries `ifNoneMatch`; its ETag is the paginator's, and a 304 ends the iteration.
 */
function conditionalFetch<T>(
  list: (
    offset: number,
    limit: number,
    options: PerRequestOptions & { ifNoneMatch?: string },
  ) => Promise<Page<T> | NotModified>,
  options: AllOptions,
  paginator: AutoPaginator<T>,
): (offset: number, limit: number) => Promise<RawPage<T> | undefined> {
  let first = options.resumeFrom === undefined
  return async (offset, limit) => {
    const top = first && offset === 0
    first = false
    const page = await list(offset, limit, {
      signal: options.signal,
      ...(top && options.ifNoneMatch !== undefined ? { ifNoneMatch: options.ifNoneMatch } : {}),
    })
    if (top) paginator.etag = page.etag
    paginator.keyExpiresAt = page.keyExpiresAt
    paginator.organizationId = page.organizationId
    if (page.notModified) {
      paginator.notModified = true
      return undefined
    }
    return page
  }
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
