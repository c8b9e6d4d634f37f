import { itemFields, nullInItem, type ResourceDescription } from '../schemas/descriptions.js'
import { techniques } from '../techniques.js'
import { indexCount, iso, tenantCondition } from './sql.js'

// The page statement's compiler: a list's parts (table, conditions, order, pieces) made into the
// SQL that reads a page, its total and the list's version in one statement.

export interface PageRequest {
  readonly limit: number
  readonly offset: number
}

/** One field of an item: its JSON key and the SQL of its value. */
export interface ItemField {
  readonly key: string
  /** The value as the item holds it (the JSON form writes it so). */
  readonly sql: string
  /**
   * The rows form's SQL where it differs: the value as PostgreSQL's text, cheaper to write than
   * to_char's; `timestamp`: Node rewrites it as ISO.
   */
  readonly rows?: { readonly sql: string; readonly timestamp: boolean }
  /** Written as null when the value is NULL; any other field is then left out. */
  readonly nullable?: boolean
}

/**
 * A resource's item fields, from its description, reading its table under the alias `r`:
 * timestamps as Date#toISOString writes them, dates as YYYY-MM-DD, everything else as stored.
 * In the rows form a timestamp comes as PostgreSQL writes it in the request transaction's UTC
 * and ISO DateStyle (`readerPreamble`), which costs the database a third of to_char's work
 * (0.2 against 0.55 µs a value), and Node rewrites it (`isoFromPostgres`, 0.2 µs); a date is
 * already YYYY-MM-DD there.
 */
export function itemFieldsOf(resource: ResourceDescription): readonly ItemField[] {
  const nullable = nullInItem(resource)
  return itemFields(resource).map(({ field, column, type }) => {
    const value = `r.${column}`
    const sql =
      type === 'timestamp' ? iso(value) : type === 'date' ? `to_char(${value}, 'YYYY-MM-DD')` : value
    const text = `${value}::text`
    return {
      key: field,
      sql,
      ...(techniques.textTimestamps && (type === 'timestamp' || type === 'date')
        ? { rows: { sql: text, timestamp: type === 'timestamp' } }
        : {}),
      ...(nullable.has(field) ? { nullable: true } : {}),
    }
  })
}

/**
 * SQL that writes one item as compact JSON text, keys in the order given. `to_json` escapes
 * strings and writes numbers and booleans bare; `concat_ws` skips the NULL members, which is
 * how a field without a value is left out.
 */
export function itemJsonSql(fields: readonly ItemField[]): string {
  const members = fields.map(({ key, sql, nullable }) => {
    if (!/^[A-Za-z][A-Za-z0-9]*$/.test(key)) throw new Error(`not a plain JSON key: ${key}`)
    const value = `to_json(${sql})::text`
    return `'"${key}":' || ${nullable ? `coalesce(${value}, 'null')` : value}`
  })
  return `'{' || concat_ws(',', ${members.join(', ')}) || '}'`
}

export interface PageStatementParts {
  readonly table: 'customers' | 'appointments'
  /** Conditions on the table under the alias `k`; `$1` is the organization. */
  readonly where: string
  /** How many parameters the conditions use, `$1` first. */
  readonly paramCount: number
  /** The order's columns; each sorts descending. The last one must be unique within an organization. */
  readonly orderBy: readonly string[]
  /** The item's fields, reading the table under the alias `r`. */
  readonly fields: readonly ItemField[]
  /**
   * The exact total as a statement of one row and column `total`; by default, count(*) over
   * `where`. It may read `PENDING_TOTAL`, what the pending changes of `pending` add to the pieces.
   */
  readonly countText?: string
  /**
   * CTEs that `countText`, `pieces` and `pending` read (`name AS MATERIALIZED (…)`,
   * comma-separated): they open both page statements and the total's statement, and run at most
   * once each, when read.
   */
  readonly ctes?: string
  /**
   * Where deep pages start (see `SEEK_FROM`): SQL of rows `(lo_at, lo_id, n)` that cut the list
   * into pieces in its order (the buckets of migration 009). A piece holds the `n` entries meeting
   * `where` whose key (the order's two columns) is at or above its bound `(lo_at, lo_id)` and below
   * the next piece's; together the pieces hold every entry, none more than 2,000. Its entries are
   * the first `n` at or above `(from_at, from_id)` (its bound, or a range's start inside it) that
   * meet `seekWhere.up` (or `where`). The bounds must
   * come in the order of an index on them, so that the pieces are summed from either end without a
   * sort and the sum stops at the offset's piece. Without it, a deep page steps over its offset
   * from the nearer end of the list.
   */
  readonly pieces?: string
  /**
   * With `pieces` whose `where` bounds the order's first column (a date range): `where` without
   * its lower bound, to step up from a piece's start, and without its upper bound, to read the page
   * down from its first key. Each scan then has one bound on the side it starts from, the key, and
   * starts there: with two (the key and the range's end), PGlite's btree started at the range's end
   * and stepped over every entry between (188 ms for a middle page of 600,000, bench/RESULTS.md).
   */
  readonly seekWhere?: { readonly up: string; readonly down: string }
  /**
   * With `pieces`: which of the list's changes not folded yet (the `list_changes` row under the
   * alias `p`, migration 013) the pieces' counts leave out, as a condition. They are the pending
   * changes from the lowest piece's bound up to the highest piece's (or up, when the highest piece
   * is counted from the bucket's folded count), and the seek adds them to the pieces it sums.
   */
  readonly pending?: string
  /** With `pieces`: the key the list starts at (SQL of `at, id`), where a seek with no piece found steps from. */
  readonly bottom?: string
}

/**
 * How far from both ends of the list a page with pieces must be to be sought: nearer an end,
 * stepping over the index entries from that end costs less than summing the pieces
 * (bench/RESULTS.md).
 */
export const SEEK_FROM = 1000

/** What the pending changes add to the pieces' counts, for a list's `countText`. */
export const PENDING_TOTAL = '(SELECT v.pending FROM v)'

/** The list's changes not folded yet, under the alias `p`. */
const changesOf = (parts: PageStatementParts) =>
  `list_changes p WHERE ${tenantCondition('p')} AND p.list = '${parts.table}'`

/** Which of them the pieces leave out (`PageStatementParts.pending`): none without pieces. */
const countedOf = (parts: PageStatementParts) => parts.pending ?? 'false'

/**
 * A page's SQL, built once per shape of request; its parameters: the conditions', then limit,
 * offset and the versions the client holds (`pageParams`).
 *
 * Both page statements also read the list's version (migration 010) and the organization, from
 * the same snapshot as the page: the ETag sent with a page always describes it. When the version
 * is one of those the client holds, they read nothing else: no total, no row (`VersionedPage`).
 */
export interface PageSql {
  /**
   * The page's rows, one column per field, then the exact `total`, `version`, `latest` and `org`,
   * set on the first row only (NULL on the others). An empty page (and an unchanged one, whose
   * `total` is NULL) is one row of NULL fields.
   */
  readonly rowsText: string
  /**
   * `rowsText` for an offset under `SEEK_FROM`, where no page is sought: without the seek's
   * branches, whose plan nodes every execution would start and end unrun
   * (docs/design/techniques.md). `rowsText` itself for a list without pieces. `rowsTextFor`
   * picks one.
   */
  readonly nearRowsText: string
  /**
   * The same page as one row: `version`, `latest`, `org`, the exact `total`, and `items` written as
   * JSON by the database.
   */
  readonly jsonText: string
  /** The total alone. */
  readonly countText: string
  /** The rows form's item columns, in order (the item's fields; `id` first). */
  readonly columns: readonly string[]
  /** The fields left out of an item when NULL (every field but those written as null). */
  readonly omittedWhenNull: readonly string[]
  /** The timestamps among the rows' columns, which Node writes as ISO. */
  readonly timestamps: readonly string[]
}

/** A page's SQL with the values of its conditions' parameters. */
export interface PageStatement extends PageSql {
  readonly params: readonly unknown[]
}

/**
 * The page and its exact total in one statement. A page is found in two index reads: its first
 * key, stepping over the offset in an index-only scan, then its rows from that key on in list
 * order, each read from the heap once. A deep page does not step over every entry before it: with
 * pieces, it starts inside the piece its offset falls in (`seekPage`); without, a page
 * in the second half is read from the other end of the index, which the exact total allows
 * (`twoEndedPage`).
 */
export function pageSql(parts: PageStatementParts): PageSql {
  const count =
    parts.countText ?? `SELECT ${indexCount(parts.table, parts.where, parts.orderBy)}::int AS total`
  const columns = parts.fields.map(({ key, sql, rows }) => `${rows?.sql ?? sql} AS "${key}"`).join(', ')
  // The list's version and the organization, then the total unless the client holds that
  // version: every branch of the page runs only on a total (`when`), so an absent one reads no row.
  // MATERIALIZED: each is computed once, not again wherever the branches name it.
  // The version is the count of the list's changes, and `latest` the time the latest of them was
  // written (migration 018), from the same two reads: a copy of the database that took other
  // writes after it was made reaches the same count at other times. In microseconds since the
  // epoch, as text; NULL when no change has a time.
  // The folds: at most one row, by its key (org_id, list); LIMIT 1 also lets the statement run with
  // its tenant conditions taken out, as the isolation test's control runs it.
  // The list's changes not folded yet are read in one pass (list_changes_pkey; recent changes
  // are not all-visible, so each is a heap fetch): the version counts them all, and the pending
  // changes the pieces leave out are summed with them: what they add to the total (`pending`,
  // PENDING_TOTAL). OFFSET 0 keeps the subquery whole, so that each change is tested once, not
  // once for each sum.
  const counted = countedOf(parts)
  // A statement that may seek also takes, from the same pass, the times of the changes the
  // pieces leave out, those that add an entry and those that remove one, in the list's order (the
  // index's: the subquery's ORDER BY is the scan's own, no sort), so that the seek counts the
  // changes inside a range of the list without reading them again (`seekPage`). The aggregate
  // takes the subquery's rows in their order: one input, no join, and no partial aggregation
  // under its LIMIT (OFFSET 0). An ORDER BY inside each `array_agg` would sort its input again,
  // whatever order it came in: 0.5 ms more over 5,000 changes on PostgreSQL 15.
  const version = (keyed: boolean) => {
    const keys = keyed
      ? `, coalesce(array_agg(p.at) FILTER (WHERE p.counted AND p.delta > 0), '{}') AS added,
                   coalesce(array_agg(p.at) FILTER (WHERE p.counted AND p.delta < 0), '{}') AS removed`
      : ''
    return `v AS MATERIALIZED (SELECT (SELECT $1::text) AS org, coalesce(f.changes, 0) + p.n AS version,
      (extract(epoch FROM greatest(f.latest_written_at, p.latest)) * 1000000)::bigint::text AS latest,
      p.pending${keyed ? ', p.added, p.removed' : ''}
      FROM (SELECT count(*) AS n, max(p.written_at) AS latest,
                   coalesce(sum(p.delta) FILTER (WHERE p.counted), 0) AS pending${keys}
            FROM (SELECT p.written_at, p.delta${keyed ? ', p.at' : ''}, (${counted}) AS counted
                  FROM ${changesOf(parts)}${keyed ? ' ORDER BY p.at, p.id' : ''} OFFSET 0) p) p
      LEFT JOIN (SELECT f.changes, f.latest_written_at FROM list_folds f
                 WHERE ${tenantCondition('f')} AND f.list = '${parts.table}' LIMIT 1) f ON true)`
  }
  const opening = (keyed: boolean) => `${parts.ctes ? `${parts.ctes}, ` : ''}${version(keyed)}`
  const countText = `WITH ${opening(false)} ${count}`
  const total = ({ ctes, keyed }: PageRows) => `WITH ${opening(keyed)}, t AS MATERIALIZED (
      SELECT (${count}) AS total FROM v WHERE v.version <> ALL (${paramsOf(parts).known}))${ctes}`
  const scalars = { total: 't.total', version: 'v.version::text', latest: 'v.latest', org: 'v.org' }
  // In the rows form, the page's scalars go on its first row only: the rest would carry the same
  // four values, each a field for the driver to read (four of a customer row's 27, on every row).
  const order = keyOrder(parts, 'DESC', 'r')
  const onFirstRow = Object.entries(scalars)
    .map(([name, sql]) => `CASE WHEN row_number() OVER (ORDER BY ${order}) = 1 THEN ${sql} END AS ${name}`)
    .join(', ')
  const rowsOf = (rows: PageRows) => `${total(rows)} SELECT ${columns}, ${onFirstRow}
    FROM v LEFT JOIN t ON true LEFT JOIN LATERAL (SELECT r.* FROM (${rows.page}) r) r ON true ORDER BY ${order}`
  const sought = parts.pieces ? seekPage(parts, parts.pieces) : undefined
  const near = twoEndedPage(parts)
  const rowsText = rowsOf(sought ?? near)
  const versioned = Object.entries(scalars).map(([name, sql]) => `${sql} AS ${name}`)
  const jsonText = `${total(sought ?? near)} SELECT ${versioned.join(', ')}, (
      SELECT coalesce(string_agg(${itemJsonSql(parts.fields)}, ',' ORDER BY ${order}), '')
      FROM (${(sought ?? near).page}) r) AS items
    FROM v LEFT JOIN t ON true`
  const omittedWhenNull = parts.fields.filter((field) => !field.nullable).map((field) => field.key)
  const timestamps = parts.fields.filter((field) => field.rows?.timestamp).map((field) => field.key)
  const keys = parts.fields.map((field) => field.key)
  return {
    rowsText,
    nearRowsText: sought ? rowsOf(near) : rowsText,
    jsonText,
    countText,
    columns: keys,
    omittedWhenNull,
    timestamps,
  }
}

/**
 * The rows statement of `statement` for `page`: without the seek for an offset under `SEEK_FROM`.
 * There the page is read from the nearer end in both: from the top when in the first half of the
 * list, and otherwise the list holds under twice the offset, so that fewer than `SEEK_FROM`
 * entries follow the page.
 */
export const rowsTextFor = (statement: PageSql, page: Pick<PageRequest, 'offset'>) =>
  page.offset < SEEK_FROM ? statement.nearRowsText : statement.rowsText

/**
 * A page's rows (each a whole row of the table), the CTEs they need after the total's `t`, and
 * whether they read the pending changes' keys from the pass (`v`).
 */
interface PageRows {
  readonly ctes: string
  readonly page: string
  readonly keyed: boolean
}

const paramsOf = (parts: PageStatementParts) => ({
  limit: `$${parts.paramCount + 1}::bigint`,
  offset: `$${parts.paramCount + 2}::bigint`,
  known: `$${parts.paramCount + 3}::bigint[]`,
})

/**
 * The versions a client holds, as the page statement's last parameter: `[]` for none (an
 * unconditional request), or `'any'` (`If-None-Match: *`), which NULL stands for: `<> ALL (NULL)`
 * is never true, so nothing is read.
 */
export type KnownVersions = readonly string[] | 'any'

const knownParam = (known: KnownVersions) => {
  if (known === 'any') return null
  for (const version of known)
    if (!/^\d{1,18}$/.test(version)) throw new Error(`not a list version: ${version}`)
  return `{${known.join(',')}}`
}

/** The parameters of `statement` for `page`, with the versions the client holds. */
export const pageParams = (statement: PageStatement, page: PageRequest, known: KnownVersions = []) => [
  ...statement.params,
  page.limit,
  page.offset,
  knownParam(known),
]

/** The list's order on the table under `alias`, or its reverse. */
const keyOrder = (parts: PageStatementParts, direction: 'ASC' | 'DESC', alias = 'k') =>
  parts.orderBy.map((column) => `${alias}.${column} ${direction}`).join(', ')

/**
 * Up to `count` rows read in `direction` from the key the subquery `first` yields (its columns
 * named as the order's), that key's row first: one index scan from the key on, each row read from
 * the heap once. Without a key, no rows. The order's columns compared as one row are the index's
 * condition, so the scan starts at the key (test/plans/request-plans.test.ts).
 */
function rowsFrom(
  parts: PageStatementParts,
  first: string,
  direction: 'ASC' | 'DESC',
  count: string,
): string {
  const columns = (alias: string) => parts.orderBy.map((column) => `${alias}.${column}`).join(', ')
  const from = direction === 'DESC' ? '<=' : '>='
  return `(SELECT k.* FROM (${first}) b CROSS JOIN LATERAL (
        SELECT k.* FROM ${parts.table} k WHERE ${parts.where} AND (${columns('k')}) ${from} (${columns('b')})
        ORDER BY ${keyOrder(parts, direction)} LIMIT ${count}) k)`
}

/** The key `skip` entries into the list read in `direction` (an index-only scan); `when` decides if it runs. */
function keyAt(parts: PageStatementParts, direction: 'ASC' | 'DESC', skip: string, when: string): string {
  const columns = parts.orderBy.map((column) => `k.${column}`).join(', ')
  return `SELECT ${columns} FROM ${parts.table} k WHERE ${parts.where} AND ${when}
        ORDER BY ${keyOrder(parts, direction)} LIMIT 1 OFFSET ${skip}`
}

/** The page read from the top of the list, stepping over the offset; `when` decides if it runs. */
function fromTop(parts: PageStatementParts, when: string): string {
  const { limit, offset } = paramsOf(parts)
  return rowsFrom(parts, keyAt(parts, 'DESC', offset, when), 'DESC', limit)
}

/**
 * The page read backwards from the far end of the list, stepping over the entries after the page
 * (the exact total `t.total` says how many); `when` decides if it runs.
 */
function fromFarEnd(parts: PageStatementParts, when: string): string {
  const { limit, offset } = paramsOf(parts)
  // Past the end the page holds no rows, and no key is read.
  const first = keyAt(
    parts,
    'ASC',
    `greatest(0, t.total - ${offset} - ${limit})`,
    `${when} AND ${offset} < t.total`,
  )
  return rowsFrom(parts, first, 'ASC', `greatest(0, least(${limit}, t.total - ${offset}))`)
}

/**
 * Without pieces: the page from the nearer end of the index; the last page costs what the first
 * does, the middle one steps over half the list. Only the branch that applies runs.
 */
function twoEndedPage(parts: PageStatementParts): PageRows {
  const { offset } = paramsOf(parts)
  const page = `${fromTop(parts, `${offset} * 2 < t.total`)}
      UNION ALL
      ${fromFarEnd(parts, `${offset} * 2 >= t.total`)}`
  return { ctes: '', page, keyed: false }
}

/**
 * With pieces: a page fewer than `SEEK_FROM` entries from either end of the list is read from
 * that end. Any other is sought: the pieces are summed from the nearer end of the list (newest
 * first for a page in the first half, oldest first for one in the second), and the page starts
 * inside the one its offset falls in, found by stepping up from that piece's bound over at most
 * its entries (2,000). Only the branch that applies runs.
 */
function seekPage(parts: PageStatementParts, pieces: string): PageRows {
  const { limit, offset } = paramsOf(parts)
  const [first, second] = parts.orderBy
  if (!first || !second || parts.orderBy.length !== 2)
    throw new Error('pieces need an order of two columns, a time and an id')
  // The total as a value computed once (an InitPlan), so that the seek runs only when it applies.
  const total = '(SELECT t.total FROM t)'
  const topHalf = (total: string) => `${offset} * 2 < ${total}`
  // The entries to step over from the nearer end: the offset, or those after the page.
  const nearerEndSkip = `(CASE WHEN ${topHalf(total)} THEN ${offset} ELSE ${total} - ${offset} - ${limit} END)`
  const seeks = `${nearerEndSkip} >= ${SEEK_FROM}`
  // The pieces are summed as folded; the pending changes then make the sums exact where the
  // offset may fall. At most `inserted` entries (the pending insertions: the changes that add an
  // entry, whose times the pass took) can be above a piece's folded sum, so the pieces before the
  // first whose folded sum passes the offset less them are passed over unread; from there on,
  // each piece's sum is made exact by the pending changes inside it (`pendingIn`), until the one
  // the offset falls in: the page steps over at most that piece's entries.
  const inserted = '(SELECT cardinality(v.added) FROM v)'
  const pendingWhere = `${changesOf(parts)} AND (${countedOf(parts)})`
  /**
   * The sum of the pending changes from the key `lo` up to `hi` (`[at, id]`, bare values in the
   * index's condition: an expression there is kept out of it by row-level security; no key: open
   * on that side). The pass took the times of the changes the pieces leave out that add an entry
   * and of those that remove one, each in the list's order (`v.added`, `v.removed`): those after
   * `lo`'s instant and before `hi`'s are counted by a binary search of the times at each end
   * (`width_bucket`: how many are up to a time). Those of an end's own instant, on the range's
   * side of its id, are read from the index (both ends at one instant: between the two ids),
   * and only where the pass saw a change at that instant: a change is read again only where it
   * shares the instant of a piece's bound.
   *
   * Each read is bounded on both sides. A row comparison ends a scan only where its first column
   * decides, so that `(at, id) < hi` would run on through every change at `hi`'s instant and past
   * it (a crowded instant's, or all of them).
   */
  const upTo = (times: string, at: string) => `width_bucket(${at}, ${times})`
  const before = (times: string, at: string) => `width_bucket(${at} - interval '1 microsecond', ${times})`
  const none = (at: string) =>
    ['v.added', 'v.removed'].map((times) => `${upTo(times, at)} = ${before(times, at)}`).join(' AND ')
  const read = (...conditions: string[]) =>
    `(SELECT coalesce(sum(p.delta), 0) FROM ${pendingWhere} AND ${conditions.join(' AND ')})`
  const pendingIn = (lo?: readonly [string, string], hi?: readonly [string, string]) => {
    // Between the two instants: none where they are one (`greatest`).
    const between = (times: string) =>
      `greatest(0, ${hi ? before(times, hi[0]) : `cardinality(${times})`} - ${lo ? upTo(times, lo[0]) : 0})`
    const sameInstant = lo && hi && `${lo[0]} = ${hi[0]}`
    const atLo =
      lo &&
      `CASE WHEN ${none(lo[0])} THEN 0
            ${hi ? `WHEN ${sameInstant} THEN ${read(`p.at = ${lo[0]}`, `p.id >= ${lo[1]}`, `p.id < ${hi[1]}`)}` : ''}
            ELSE ${read(`p.at = ${lo[0]}`, `p.id >= ${lo[1]}`)} END`
    const atHi =
      hi &&
      `CASE WHEN ${none(hi[0])}${sameInstant ? ` OR ${sameInstant}` : ''} THEN 0
            ELSE ${read(`p.at = ${hi[0]}`, `p.id < ${hi[1]}`)} END`
    const ends = [atLo, atHi]
      .filter(Boolean)
      .map((end) => ` + ${end}`)
      .join('')
    return `(SELECT ${between('v.added')} - ${between('v.removed')}${ends} FROM v)`
  }
  const bound = ['w.lo_at', 'w.lo_id'] as const
  // Inside a piece: from its bound up to the next piece's (`candidates`).
  const inside = pendingIn(bound, ['w.hi_at', 'w.hi_id'])
  const bottom = parts.bottom ?? `'-infinity'::timestamptz, ''`
  /**
   * The pieces summed as folded in `direction`, `through` each one, from the first that may hold
   * the offset (`past`) on, which is `first`; each with the next piece's bound up (`hi_at`,
   * `hi_id`; above the highest piece, the top of the list).
   */
  const candidates = (direction: 'ASC' | 'DESC', when: string, past: string) => {
    const order = `ORDER BY w.lo_at ${direction}, w.lo_id ${direction}`
    // The one before in the newest-first order, after in the oldest-first.
    const next = direction === 'DESC' ? 'lag' : 'lead'
    return `SELECT w.*, row_number() OVER (${order}) = 1 AS first,
               coalesce(${next}(w.lo_at) OVER (${order}), 'infinity') AS hi_at,
               coalesce(${next}(w.lo_id) OVER (${order}), '') AS hi_id
        FROM (SELECT b.lo_at, b.lo_id, b.from_at, b.from_id, b.n,
                     sum(b.n) OVER (ORDER BY b.lo_at ${direction}, b.lo_id ${direction}) AS through
              FROM (${pieces}) b) w
        WHERE ${when} AND ${seeks} AND w.through > ${past} - ${inserted}`
  }
  // Newest first: `exact` counts the entries from the top of the list to each piece's bound, so
  // the offset's entry is `exact - 1 - offset` entries above it: the first candidate's sum takes
  // every pending change above its bound, each next one those inside it. With no piece far
  // enough, the list's bottom, `total - 1 - offset` entries below it.
  const newestFirst = `(SELECT w.from_at, w.from_id, w.exact - 1 - ${offset} AS skip
      FROM (SELECT w.lo_at, w.lo_id, w.from_at, w.from_id,
                   w.through + sum(CASE WHEN w.first THEN ${pendingIn(bound)} ELSE ${inside} END)
                     OVER (ORDER BY w.lo_at DESC, w.lo_id DESC) AS exact
            FROM (${candidates('DESC', topHalf(total), offset)}) w) w
      WHERE w.exact > ${offset}
      ORDER BY w.lo_at DESC, w.lo_id DESC LIMIT 1)
      UNION ALL
      (SELECT ${bottom}, ${total} - 1 - ${offset} WHERE ${topHalf(total)} AND ${seeks})
      LIMIT 1`
  // Oldest first: the offset's entry is `total - 1 - offset` entries above the list's bottom;
  // `exact` counts the entries from the bottom through each piece, the first candidate's with the
  // pending changes below it, and `below` those under its bound. The highest piece always passes
  // (its `exact` is the total); with no piece at all, the list's bottom. Each piece's `inside` is
  // read once, for its sum and its skip: the window numbering the candidates keeps that level
  // whole (and in the pieces' order, so that nothing is sorted and the sums stop at the piece).
  const fromBottom = `${total} - 1 - ${offset}`
  const oldestFirst = `(SELECT w.from_at, w.from_id, ${fromBottom} - (w.exact - w.n - w.inside) AS skip
      FROM (SELECT w.*, w.through + sum(w.added + w.inside) OVER (ORDER BY w.lo_at, w.lo_id) AS exact
            FROM (SELECT w.*, ${inside} AS inside,
                         CASE WHEN row_number() OVER (ORDER BY w.lo_at, w.lo_id) = 1
                              THEN ${pendingIn(undefined, bound)} ELSE 0 END AS added
                  FROM (${candidates('ASC', `NOT ${topHalf(total)}`, fromBottom)}) w) w) w
      WHERE w.exact > ${fromBottom}
      ORDER BY w.lo_at, w.lo_id LIMIT 1)
      UNION ALL
      (SELECT ${bottom}, ${fromBottom} WHERE NOT ${topHalf(total)} AND ${seeks})
      LIMIT 1`
  const ctes = `, s AS MATERIALIZED ((${newestFirst}) UNION ALL (${oldestFirst}))`
  const up = parts.seekWhere ? { ...parts, where: parts.seekWhere.up } : parts
  const down = parts.seekWhere ? { ...parts, where: parts.seekWhere.down } : parts
  const sought = `SELECT k.* FROM s CROSS JOIN LATERAL (
        ${keyAt(up, 'ASC', 's.skip', `(k.${first}, k.${second}) >= (s.from_at, s.from_id)`)}) k`
  const page = `${fromTop(parts, `${topHalf('t.total')} AND ${offset} < ${SEEK_FROM}`)}
      UNION ALL
      ${fromFarEnd(parts, `NOT ${topHalf('t.total')} AND t.total - ${offset} - ${limit} < ${SEEK_FROM}`)}
      UNION ALL
      ${rowsFrom(down, sought, 'DESC', limit)}`
  return { ctes, page, keyed: true }
}
