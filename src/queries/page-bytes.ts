import { isUtf8 } from 'node:buffer'
import pg from 'pg'
import { isoFromPostgres } from './page-rows.js'
import type { PageSql } from './page-statement.js'

// The rows form's items written as JSON straight from the bytes PostgreSQL sent: each DataRow
// message of the page's result is read field by field where it lies in the connection's buffer,
// and its values are copied into the items' bytes, escaped where JSON needs it. No string and no
// object is made per field or per row. The bytes are exactly those `itemsJson` writes from pg's
// rows (the tests hold the two to each other).

/** How a column's text becomes its JSON value, by what pg would have made of it. */
enum Kind {
  /** pg hands the text on as it is: a JSON string. */
  String = 0,
  /** bool: `t` or `f`. */
  Boolean = 1,
  /** int2 or int4: pg makes a number of the text, which JSON writes with the same digits. */
  Integer = 2,
  /** A timestamp as PostgreSQL's text, written as ISO (`isoFromPostgres`). */
  Timestamp = 3,
}

const BOOL = 16
const INT2 = 21
const INT4 = 23
/** Whether pg hands a column of this type on as its text (no parser of its own: text, enums). */
const asIs = (oid: number) =>
  pg.types.getTypeParser(oid as typeof pg.types.builtins.TEXT, 'text') ===
  pg.types.getTypeParser(pg.types.builtins.TEXT, 'text')

/** The page's four scalars, on its first row only (`PageSql.rowsText`). */
const SCALARS = ['total', 'version', 'latest', 'org'] as const
export type PageScalars = {
  readonly total: number | null
  readonly version: string
  readonly latest: string | null
  readonly org: string
}

/** A column of the page's result as a RowDescription names it. */
export interface ResultField {
  readonly name: string
  readonly dataTypeID: number
}

interface Column {
  readonly kind: Kind
  /** `"key":`, and `,"key":` for a member after the item's first. */
  readonly first: Buffer
  readonly next: Buffer
  /** Written as null when NULL, rather than left out. */
  readonly nullable: boolean
}

const QUOTE = 0x22
const BACKSLASH = 0x5c
/** JSON.stringify's escapes: 1 for `\X` (the byte's letter in SHORT), 2 for `\u00XX`, 0 for none. */
const ESCAPE = new Uint8Array(256)
const SHORT = new Uint8Array(256)
for (let byte = 0; byte < 0x20; byte++) ESCAPE[byte] = 2
for (const [byte, letter] of [
  [8, 'b'],
  [9, 't'],
  [10, 'n'],
  [12, 'f'],
  [13, 'r'],
  [QUOTE, '"'],
  [BACKSLASH, '\\'],
] as const) {
  ESCAPE[byte] = 1
  SHORT[byte] = letter.charCodeAt(0)
}
/** The list envelope (schemas/envelope.ts) up to its first item. */
export const DATA_OPEN = Buffer.from('{"data":[')

const HEX = Buffer.from('0123456789abcdef')
const TRUE = Buffer.from('true')
const FALSE = Buffer.from('false')
const NULL = Buffer.from('null')

/** `part` into `out` at `at`; the new end. */
function put(out: Buffer, at: number, part: Buffer): number {
  for (let i = 0; i < part.length; i++) out[at++] = part[i] as number
  return at
}

/** A big-endian int32 of a message. */
const int32 = (bytes: Buffer, at: number) =>
  ((bytes[at] as number) << 24) |
  ((bytes[at + 1] as number) << 16) |
  ((bytes[at + 2] as number) << 8) |
  (bytes[at + 3] as number)

/**
 * The text's bytes as a JSON string, as JSON.stringify writes it: `"` and `\` escaped, control
 * characters by their short escape or `\u00XX`, everything else as it is. -1 for text that is not
 * UTF-8 (a SQL_ASCII database), which the caller writes as pg decodes it.
 */
function jsonString(out: Buffer, at: number, bytes: Buffer, from: number, end: number): number {
  out[at++] = QUOTE
  let checked = false
  for (let i = from; i < end; i++) {
    const byte = bytes[i] as number
    const escaped = ESCAPE[byte]
    if (escaped === 0) {
      if (byte >= 0x80 && !checked) {
        if (!isUtf8(bytes.subarray(from, end))) return -1
        checked = true
      }
      out[at++] = byte
    } else {
      out[at++] = BACKSLASH
      if (escaped === 1) out[at++] = SHORT[byte] as number
      else {
        out[at++] = 0x75
        out[at++] = 0x30
        out[at++] = 0x30
        out[at++] = HEX[byte >> 4] as number
        out[at++] = HEX[byte & 15] as number
      }
    }
  }
  out[at++] = QUOTE
  return at
}

/**
 * `isoFromPostgres` on the bytes, the usual shape ('2026-03-02 10:00:00.12+00') by position; -1 for
 * any other, which the caller writes through the function.
 */
function isoTimestamp(out: Buffer, at: number, bytes: Buffer, from: number, end: number): number {
  const text = end - 3 - from
  if (
    bytes[from + 4] !== 0x2d ||
    bytes[from + 10] !== 0x20 ||
    bytes[end - 3] !== 0x2b ||
    bytes[end - 2] !== 0x30 ||
    bytes[end - 1] !== 0x30 ||
    !(text === 19 || (text > 20 && text <= 26 && bytes[from + 19] === 0x2e))
  )
    return -1
  out[at++] = QUOTE
  for (let i = from; i < from + 10; i++) out[at++] = bytes[i] as number
  out[at++] = 0x54
  for (let i = from + 11; i < from + 19; i++) out[at++] = bytes[i] as number
  out[at++] = 0x2e
  for (let i = from + 20; i < from + 23; i++) out[at++] = i < end - 3 ? (bytes[i] as number) : 0x30
  out[at++] = 0x5a
  out[at++] = QUOTE
  return at
}

/**
 * What a statement's result is written with, kept per statement text: the names of its result's
 * columns, and its columns as written for the types its result came with last. A page's
 * statements are the queries' own (a few per list and filter), so the map stays as small.
 */
interface Layout {
  readonly names: readonly string[]
  written?: Written
}
interface Written {
  readonly types: readonly number[]
  readonly columns: readonly Column[]
  readonly namesLength: number
}
const layouts = new Map<string, Layout>()

function layoutOf(statement: PageSql): Layout {
  let layout = layouts.get(statement.rowsText)
  if (!layout) {
    layout = { names: [...statement.columns, ...SCALARS] }
    layouts.set(statement.rowsText, layout)
  }
  return layout
}

/** The statement's columns as written for `fields`' types: the layout's, unless the types differ. */
function writtenAs(layout: Layout, statement: PageSql, fields: readonly ResultField[]): Written {
  const kept = layout.written
  if (kept?.types.every((type, i) => (fields[i] as ResultField).dataTypeID === type)) return kept
  if (statement.columns[0] !== 'id') throw new Error("a page's first column is not its items' id")
  const columns = statement.columns.map((key, i) => columnOf(statement, key, fields[i] as ResultField))
  const written = {
    types: fields.map((field) => field.dataTypeID),
    columns,
    namesLength: columns.reduce((sum, column) => sum + column.next.length + NULL.length, 2),
  }
  layout.written = written
  return written
}

function columnOf(statement: PageSql, key: string, field: ResultField): Column {
  const nullable = !statement.omittedWhenNull.includes(key)
  const name = (comma: string) => Buffer.from(`${comma}${JSON.stringify(key)}:`)
  let kind: Kind
  if (statement.timestamps.includes(key)) {
    if (!asIs(field.dataTypeID)) throw new Error(`the page's timestamp ${key} does not come as text`)
    kind = Kind.Timestamp
  } else if (field.dataTypeID === BOOL) kind = Kind.Boolean
  else if (field.dataTypeID === INT2 || field.dataTypeID === INT4) kind = Kind.Integer
  else if (asIs(field.dataTypeID)) kind = Kind.String
  else throw new Error(`the page's column ${key} is of type ${field.dataTypeID}, not written as bytes`)
  return { kind, first: name(''), next: name(','), nullable }
}

/**
 * Writes one page's items from the DataRow messages of its result, as they arrive. `accepts`
 * tells whether a result is the page's (its columns are exactly the statement's); `row` takes each
 * of its messages; `finish` gives the items and the scalars of the first row. Nothing it meets
 * in a row throws out of `row` (it runs inside the connection's parser): the first error is kept
 * and thrown by `finish`.
 */
export class PageBytesWriter {
  private columns: readonly Column[] = []
  /** The most bytes the members' names of one item take. */
  private namesLength = 0
  private out: Buffer
  private at = 0
  private scalars: PageScalars | undefined
  private error: unknown
  private accepted = false

  constructor(private readonly statement: PageSql) {
    // About a page of 50 customers; it grows for more. The items start after room for the
    // envelope's opening (`Page.written`).
    this.out = Buffer.allocUnsafe(32 * 1024)
    this.at = DATA_OPEN.copy(this.out)
  }

  /** Whether `fields` are the page's columns; if so, the rows that follow are the page's. */
  accepts(fields: readonly ResultField[]): boolean {
    const layout = layoutOf(this.statement)
    const names = layout.names
    if (fields.length !== names.length) return false
    for (let i = 0; i < names.length; i++) if ((fields[i] as ResultField).name !== names[i]) return false
    this.accepted = true
    try {
      const written = writtenAs(layout, this.statement, fields)
      this.columns = written.columns
      this.namesLength = written.namesLength
    } catch (error) {
      this.error ??= error
    }
    return true
  }

  /** One DataRow message of the page, of `length` bytes: its field count at `offset` of `bytes`. */
  row(bytes: Buffer, offset: number, length: number): void {
    if (this.error !== undefined) return
    try {
      this.writeRow(bytes, offset, length)
    } catch (error) {
      this.error = error
    }
  }

  /**
   * The items, comma-separated (empty for an empty page), and the first row's scalars; `written`:
   * the buffer they are in, after the envelope's opening (`Page.written`).
   */
  finish(): { readonly items: Buffer; readonly written: Buffer; readonly scalars: PageScalars } {
    if (this.error !== undefined) throw this.error
    if (!this.accepted || this.scalars === undefined) throw new Error('a page statement returned no row')
    return { items: this.out.subarray(DATA_OPEN.length, this.at), written: this.out, scalars: this.scalars }
  }

  private writeRow(bytes: Buffer, offset: number, length: number): void {
    const columns = this.columns
    const first = this.scalars === undefined
    let p = offset + 2
    // An empty page is one row without an item: every item has an id, its first column.
    if (int32(bytes, p) === -1) {
      for (let i = 0; i < columns.length; i++) p += 4 + Math.max(int32(bytes, p), 0)
      this.scalars = readScalars(bytes, p)
      return
    }
    // At most six bytes for each of the row's (`\u00XX`), and every member's name.
    const most = this.at + length * 6 + this.namesLength
    if (most > this.out.length) {
      const larger = Buffer.allocUnsafe(Math.max(most, this.out.length * 2))
      this.out.copy(larger, 0, 0, this.at)
      this.out = larger
    }
    const out = this.out
    let at = this.at
    if (!first) out[at++] = 0x2c
    out[at++] = 0x7b
    let members = 0
    for (let i = 0; i < columns.length; i++) {
      const column = columns[i] as Column
      const size = int32(bytes, p)
      p += 4
      if (size === -1) {
        if (!column.nullable) continue
        at = put(out, at, members++ === 0 ? column.first : column.next)
        at = put(out, at, NULL)
        continue
      }
      at = put(out, at, members++ === 0 ? column.first : column.next)
      const end = p + size
      const kind = column.kind
      if (kind === Kind.String) {
        const written = jsonString(out, at, bytes, p, end)
        at =
          written >= 0 ? written : put(out, at, Buffer.from(JSON.stringify(bytes.toString('utf8', p, end))))
      } else if (kind === Kind.Boolean) at = put(out, at, bytes[p] === 0x74 ? TRUE : FALSE)
      else if (kind === Kind.Integer) for (let j = p; j < end; j++) out[at++] = bytes[j] as number
      else {
        const written = isoTimestamp(out, at, bytes, p, end)
        at =
          written >= 0
            ? written
            : put(out, at, Buffer.from(JSON.stringify(isoFromPostgres(bytes.toString('utf8', p, end)))))
      }
      p = end
    }
    out[at++] = 0x7d
    this.at = at
    if (first) this.scalars = readScalars(bytes, p)
  }
}

/** The four scalars after the item's columns of the first row, at `at` of `bytes`. */
function readScalars(bytes: Buffer, at: number): PageScalars {
  const values: (string | null)[] = []
  for (let i = 0; i < SCALARS.length; i++) {
    const length = int32(bytes, at)
    at += 4
    values.push(length === -1 ? null : bytes.toString('utf8', at, at + length))
    if (length > 0) at += length
  }
  const [total, version, latest, org] = values
  if (version == null || org == null) throw new Error("a page's first row holds no version or organization")
  return { total: total == null ? null : Number(total), version, latest: latest ?? null, org }
}
