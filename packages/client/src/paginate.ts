import { PaginationError } from './errors.js'

/** A page as the API sends it. */
export interface Pagination {
  readonly limit: number
  readonly offset: number
  readonly total: number
  readonly hasMore: boolean
}

export interface RawPage<T> {
  readonly data: readonly T[]
  readonly pagination: Pagination
  readonly requestId: string | undefined
  /** The key's expiry, when it has one (the server's Openbook-Key-Expires). */
  readonly keyExpiresAt?: Date | undefined
  /** The key's organization (the server's Openbook-Organization). */
  readonly organizationId?: string | undefined
}

/**
 * Where auto-pagination stands after a page: pass it as `resumeFrom` to go on from there in
 * another process (it is plain JSON), with the same guarantee.
 */
export interface Cursor {
  /** The offset of the next request. */
  readonly offset: number
  /** The sort key of the last row yielded. */
  readonly lastKey: string | undefined
  /** The ids yielded with that sort key. */
  readonly tie: readonly string[]
  /** True after the last page. */
  readonly done: boolean
}

/** A page of auto-pagination: only rows not yielded before, in the list's order. */
export interface AutoPage<T> {
  readonly data: T[]
  /** The pagination of the request that brought these rows. */
  readonly pagination: Pagination
  readonly requestId: string | undefined
  /** The key's expiry as the request that brought these rows reported it; undefined: it has none. */
  readonly keyExpiresAt: Date | undefined
  /** The key's organization as the request that brought these rows named it. */
  readonly organizationId: string | undefined
  /** Where the iteration stands after this page. */
  readonly cursor: Cursor
  /**
   * Rows yielded before, met again at another place (moved: their sort key changed), as they are
   * now: not in `data`, since they were yielded already; for a copy to update (openbook-sync does).
   */
  readonly moved: T[]
}

/** What auto-pagination did, for monitoring: requests made, re-reads, duplicates dropped. */
export interface PaginationStats {
  requests: number
  /** Requests that re-read an earlier part of the list, because rows before the cursor went away. */
  rereads: number
  /** Rows skipped because they were yielded already (the overlap, and rows seen again). */
  duplicates: number
  /** Rows yielded. */
  rows: number
  /**
   * Rows met again at another place after they were yielded (an appointment moved to an earlier
   * start while the iteration went on), and not yielded again.
   */
  moved: number
}

export interface PaginateOptions<T> {
  /**
   * Reads `limit` rows from `offset`; undefined when the server answered a conditional request
   * 304 (the list has not changed since the ETag the caller holds): the iteration ends there.
   */
  readonly fetchPage: (offset: number, limit: number) => Promise<RawPage<T> | undefined>
  /** The item's first sort key, descending: an ISO-8601 UTC date-time as the API writes it. */
  readonly sortKey: (item: T) => string
  readonly id: (item: T) => string
  /** New rows per page when nothing changes (1 to 99; the request reads one more). */
  readonly pageSize: number
  /** Consecutive re-reads allowed before giving up (default 64). */
  readonly maxRereads?: number
  /** A cursor from an earlier page, to go on from there. */
  readonly resumeFrom?: Cursor | undefined
  /** Ids yielded already by this iteration before a resume: not yielded again. */
  readonly seen?: Iterable<string> | undefined
}

/**
 * Offset pagination that never misses a row, over a list sorted by (sortKey desc, id desc).
 *
 * Guarantee: every row that stays active, with the same sort key, for the whole iteration is
 * yielded exactly once, and those rows come in the list's order; no row is ever yielded twice.
 * Rows inserted, deactivated or reactivated meanwhile may or may not be yielded.
 *
 * How: each request starts one row before the position right after the last row yielded, so
 * that its first row should be that last row again. A page "continues" when it starts at or
 * before the last row yielded: it holds a row with a later sort key, or one of the rows already
 * yielded with the same sort key, or it starts at offset 0. Then its rows after that point are
 * exactly the ones that follow, and the ones already yielded are dropped. When a page starts
 * after the last row yielded (rows before it were deactivated, and everything moved toward
 * the front), it is re-read from further back, twice as far each time, until it continues.
 *
 * The order is only compared by sort key (the server writes it to the millisecond, and keeps
 * microseconds): rows with the same visible sort key are told apart by id, in a set that holds
 * the ids yielded with the current sort key.
 */
export async function* paginate<T>(
  options: PaginateOptions<T>,
  stats: PaginationStats,
): AsyncGenerator<AutoPage<T>> {
  const { fetchPage, sortKey, id, pageSize } = options
  const limit = Math.min(100, pageSize + 1)
  const maxRereads = options.maxRereads ?? 64
  /** The sort key of the last row yielded; undefined before the first. */
  let lastKey: string | undefined = options.resumeFrom?.lastKey
  /** Ids yielded with `lastKey`. */
  let tie = new Set<string>(options.resumeFrom?.tie ?? [])
  let offset = options.resumeFrom?.offset ?? 0
  if (options.resumeFrom?.done) return
  let stepBack = pageSize
  let rereads = 0
  /** Every id yielded: a row whose sort key changed after it was yielded is not yielded again. */
  const yielded = new Set<string>(options.seen ?? [])
  for (;;) {
    const page = await fetchPage(offset, limit)
    stats.requests++
    if (page === undefined) return
    const rows = page.data
    const first = rows[0]
    const continues =
      lastKey === undefined ||
      offset === 0 ||
      (first !== undefined &&
        (sortKey(first) > lastKey || (sortKey(first) === lastKey && tie.has(id(first)))))
    if (!continues) {
      // Rows before the cursor went away: the rows that followed the last one yielded now lie
      // before `offset`. Read again from further back.
      if (++rereads > maxRereads)
        throw new PaginationError({
          error: 'Pagination lost its place',
          message: `the list kept moving: ${maxRereads} re-reads in a row did not find where the last page ended`,
          code: 'pagination_lost',
          requestId: page.requestId,
        })
      stats.rereads++
      offset = Math.max(0, offset - stepBack)
      stepBack *= 2
      continue
    }
    rereads = 0
    stepBack = pageSize
    const fresh: T[] = []
    const moved: T[] = []
    for (const row of rows) {
      const key = sortKey(row)
      if (lastKey !== undefined && (key > lastKey || (key === lastKey && tie.has(id(row))))) {
        // At or before the last row yielded: yielded already, or inserted behind the cursor.
        stats.duplicates++
        continue
      }
      if (key !== lastKey) {
        lastKey = key
        tie = new Set()
      }
      tie.add(id(row))
      if (yielded.has(id(row))) {
        // Yielded before at another place: it moved (its sort key changed) behind the cursor.
        stats.moved++
        moved.push(row)
        continue
      }
      yielded.add(id(row))
      fresh.push(row)
    }
    stats.rows += fresh.length
    // A page that continues and has no more after it ends the list (an empty one only at offset 0).
    const done = !page.pagination.hasMore || rows.length === 0
    // The next request starts at this page's last row, which should be the last one yielded.
    if (!done) offset += rows.length - 1
    const cursor: Cursor = { offset, lastKey, tie: [...tie], done }
    if (fresh.length > 0 || moved.length > 0 || done)
      yield {
        data: fresh,
        pagination: page.pagination,
        requestId: page.requestId,
        keyExpiresAt: page.keyExpiresAt,
        organizationId: page.organizationId,
        cursor,
        moved,
      }
    if (done) return
  }
}
