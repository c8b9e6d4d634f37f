import type { Sql, StoreAdapter } from '../store/types.js'
import { techniques } from '../techniques.js'
import { DATA_OPEN, PageBytesWriter } from './page-bytes.js'
import { itemsJson } from './page-rows.js'
import {
  type KnownVersions,
  type PageRequest,
  type PageStatement,
  pageParams,
  rowsTextFor,
} from './page-statement.js'

// The page statement's runner: the statement (page-statement.ts) run in the form the store reads
// best, its rows decoded (page-rows.ts), and the answer made a page with its pagination.

export interface Pagination {
  readonly limit: number
  readonly offset: number
  readonly total: number
  readonly hasMore: boolean
}

/**
 * One page: `items` holds the page's items as JSON objects, comma-separated and in order
 * (empty for an empty page), ready to go between `[` and `]`.
 */
export interface Page {
  readonly items: Buffer
  readonly pagination: Pagination
  /**
   * Where the items were written with the envelope's opening before them (`DATA_OPEN`) and room
   * after them: the body is made there, without a copy of the items.
   */
  readonly written?: Buffer
}

/**
 * The response body: the list envelope around the page's items; in the buffer they were written
 * in where it has room for the rest, which saves a copy of the page and a buffer of its size.
 */
export function pageBody(page: Page): Buffer {
  const close = `],"pagination":${JSON.stringify(page.pagination)}}`
  const end = DATA_OPEN.length + page.items.length
  const written = page.written
  if (written && written.length >= end + close.length) {
    written.write(close, end, 'latin1')
    return written.subarray(0, end + close.length)
  }
  const body = Buffer.allocUnsafe(end + close.length)
  DATA_OPEN.copy(body)
  page.items.copy(body, DATA_OPEN.length)
  body.write(close, end, 'latin1')
  return body
}

/**
 * A page statement's answer: the list's version and the key's organization, and the page unless
 * the version is one of those the client holds (then nothing else was read).
 */
export interface VersionedPage {
  readonly version: string
  /** When the latest of the version's changes was written (µs since the epoch), if any has a time. */
  readonly latest: string | null
  readonly orgId: string
  readonly page: Page | undefined
}

/**
 * Runs a page statement for `page` on `sql`, in the form its store reads best
 * (`StoreAdapter.pageForm`): one statement, one snapshot for the version, the total and the rows.
 */
export async function fetchVersionedPage(
  store: StoreAdapter,
  sql: Sql,
  statement: PageStatement,
  page: PageRequest,
  known: KnownVersions = [],
): Promise<VersionedPage> {
  const params = pageParams(statement, page, known)
  type Versioned = { total: number | null; version: string; latest: string | null; org: string }
  let answer: Versioned
  let items: Buffer
  let written: Buffer | undefined
  if (store.pageForm === 'json') {
    const [row] = await sql.query<Versioned & { items: string }>(statement.jsonText, params)
    if (!row) throw new Error('a page statement returned no row')
    answer = row
    items = Buffer.from(row.items)
  } else if (techniques.rowBytes && sql.queryInto) {
    // The items written from the rows' bytes as they arrive (page-bytes.ts).
    const writer = new PageBytesWriter(statement)
    await sql.queryInto(writer, rowsTextFor(statement, page), params)
    const result = writer.finish()
    answer = result.scalars
    items = result.items
    written = result.written
  } else {
    const rows = await sql.query<Record<string, unknown> & Versioned>(rowsTextFor(statement, page), params)
    const [first] = rows
    if (!first) throw new Error('a page statement returned no row')
    answer = { total: first.total, version: first.version, latest: first.latest, org: first.org }
    // An empty page is one row without an item (every item has an id).
    items = Buffer.from(first.id === null ? '' : itemsJson(rows, statement))
  }
  const { total, version, latest, org } = answer
  if (total === null) return { version, latest, orgId: org, page: undefined }
  // Page and total come from one snapshot: more follow exactly when the page ends before the total.
  const hasMore = page.offset + page.limit < total
  return {
    version,
    latest,
    orgId: org,
    page: {
      items,
      pagination: { limit: page.limit, offset: page.offset, total, hasMore },
      ...(written ? { written } : {}),
    },
  }
}
