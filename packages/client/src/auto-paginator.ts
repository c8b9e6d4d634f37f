/** What `list` and `all` return: a page or a 304, and auto-pagination over a list. */
import { UsageError } from './errors.js'
import type { components } from './generated/api.js'
import type { AutoPage, Cursor, PaginationStats, RawPage } from './paginate.js'
import type { JsonAnswer, PerRequestOptions } from './transport.js'

type Pagination = components['schemas']['Pagination']

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
export function pageOrNotModified<T>(answer: JsonAnswer): Page<T> | NotModified {
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

export function checkPageSize(pageSize: number | undefined): number {
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
export function conditionalFetch<T>(
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
