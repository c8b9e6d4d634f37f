import { FIELDS, KEPT_COLUMNS, KEY_FIELDS, type RecordType, TABLES, WRITE_ORDER } from './tables.js'

/** Rows gathered for one round trip of the bulk loader, already in COPY's text format. */

const ESCAPES: Readonly<Record<string, string>> = { '\\': '\\\\', '\t': '\\t', '\n': '\\n', '\r': '\\r' }
const SPECIAL = /[\\\t\n\r]/
const SPECIALS = /[\\\t\n\r]/g

/** One value in COPY's text format. */
export function copyValue(value: unknown): string {
  if (value === null || value === undefined) return '\\N'
  if (typeof value === 'string') {
    return SPECIAL.test(value) ? value.replace(SPECIALS, (c) => ESCAPES[c] ?? c) : value
  }
  if (typeof value === 'boolean') return value ? 't' : 'f'
  return String(value)
}

/** One type's rows of a chunk: COPY lines, their file lines, and where each key sits. */
interface TypeRows {
  readonly text: string[]
  /** The line each row's values come from, and the line where its key first appeared. */
  readonly lines: number[]
  readonly firstLines: number[]
  readonly slotOfKey: Map<string, number>
  /** Each row's values, kept only for types with columns to keep (KEPT_COLUMNS). */
  readonly values: string[][]
}

/**
 * Rows of any types, already in COPY's text format, with their file line numbers. A key seen
 * again in the same chunk replaces the earlier row (the last line wins, as a second import would),
 * so that the merge needs no sort to remove duplicates.
 */
export class Chunk {
  private readonly byType = new Map<RecordType, TypeRows>()
  rows = 0
  lastLine = 0

  /**
   * `row` is named by column (snake_case) or, with `byField`, by the import's field names
   * (camelCase); absent values are NULL.
   */
  add(type: RecordType, line: number, row: Readonly<Record<string, unknown>>, byField = false): void {
    let rows = this.byType.get(type)
    if (!rows) {
      rows = { text: [], lines: [], firstLines: [], slotOfKey: new Map(), values: [] }
      this.byType.set(type, rows)
    }
    const keyNames = byField ? KEY_FIELDS[type] : TABLES[type].key
    const key =
      keyNames.length === 1 ? String(row[keyNames[0] as string]) : keyNames.map((k) => row[k]).join('\u0000')
    const slot = rows.slotOfKey.get(key) ?? rows.text.length
    rows.slotOfKey.set(key, slot)
    const names = byField ? FIELDS[type] : TABLES[type].columns
    // One array joined once: several times cheaper than growing a string value by value.
    const values: string[] = new Array(names.length + 2)
    values[0] = String(line)
    values[1] = String(rows.firstLines[slot] ?? line)
    for (let i = 0; i < names.length; i++) values[i + 2] = copyValue(row[names[i] as string])
    const kept = KEPT_COLUMNS[type]
    if (kept.length) {
      // A later line that leaves a kept column out keeps the earlier line's value, as the merge
      // keeps a stored one.
      const earlier = rows.values[slot]
      if (earlier) for (const i of kept) if (values[i + 2] === '\\N') values[i + 2] = earlier[i + 2] as string
      rows.values[slot] = values
    }
    rows.text[slot] = values.join('\t')
    rows.lines[slot] = line
    rows.firstLines[slot] ??= line
    this.rows++
    this.lastLine = line
  }

  types(): RecordType[] {
    return WRITE_ORDER.filter((type) => this.byType.has(type))
  }

  /** Distinct keys of `type` in this chunk. */
  count(type: RecordType): number {
    return this.byType.get(type)?.text.length ?? 0
  }

  copyText(type: RecordType): string {
    const text = this.byType.get(type)?.text ?? []
    return text.length ? `${text.join('\n')}\n` : ''
  }

  /** The file line of the n-th (1-based) row of `type` in this chunk's COPY text. */
  lineOf(type: RecordType, n: number): number | undefined {
    return this.byType.get(type)?.lines[n - 1]
  }
}
