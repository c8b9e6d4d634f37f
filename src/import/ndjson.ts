import type { Readable } from 'node:stream'
import { RECORD_TYPES, type RecordType } from '../store/bulk.js'
import type { Store } from '../store/types.js'
import { bulkLoad, ImportError } from './loader.js'
import { RECORD_SCHEMAS } from './records.js'

export { ImportError } from './loader.js'

/** Lines per chunk: large enough for set-based statements, small enough to keep memory flat. */
const CHUNK_LINES = 25_000

/**
 * The longest line an import reads, in bytes without its line break: far more than any valid
 * record needs, far less than a JavaScript string can hold.
 */
export const MAX_LINE_BYTES = 1_048_576

export interface ImportOptions {
  /** Called after each chunk with the number of lines read and written so far. */
  readonly onProgress?: (lines: number) => void
  /** Lines per chunk (tests use small chunks to cross chunk boundaries). */
  readonly chunkLines?: number
}

export interface ImportSummary {
  readonly lines: number
  readonly counts: Partial<Record<RecordType, number>>
  /** Tables loaded on the first-load path (indexes and foreign keys rebuilt at the end). */
  readonly firstLoad: string[]
}

const LF = 0x0a
const CR = 0x0d
const BOM = Buffer.from([0xef, 0xbb, 0xbf])

const tooLong = (lineNumber: number) => new ImportError(`line ${lineNumber}: line too long (over 1 MiB)`)

/**
 * The input's lines as bytes, numbered from 1: split on LF, a CR before it dropped, a UTF-8 BOM
 * at the very start of the input skipped. A line is never held beyond MAX_LINE_BYTES: a longer
 * one fails as soon as that many bytes of it are seen, so that a file without line breaks
 * cannot fill the memory.
 */
export async function* inputLines(
  input: AsyncIterable<Buffer | Uint8Array | string>,
): AsyncGenerator<{ readonly bytes: Buffer; readonly number: number }> {
  let number = 1
  // The start of the current line, from earlier chunks.
  let held: Buffer[] = []
  let heldBytes = 0
  const line = (bytes: Buffer) => {
    let end = bytes.length
    if (end > 0 && bytes[end - 1] === CR) end--
    const start = number === 1 && bytes.subarray(0, 3).equals(BOM) ? 3 : 0
    if (end - start > MAX_LINE_BYTES) throw tooLong(number)
    return { bytes: bytes.subarray(start, end), number: number++ }
  }
  for await (const chunk of input) {
    const bytes =
      typeof chunk === 'string'
        ? Buffer.from(chunk)
        : Buffer.isBuffer(chunk)
          ? chunk
          : Buffer.from(chunk.buffer, chunk.byteOffset, chunk.length)
    let start = 0
    for (let end = bytes.indexOf(LF); end !== -1; end = bytes.indexOf(LF, start)) {
      let piece = bytes.subarray(start, end)
      if (held.length) {
        piece = Buffer.concat([...held, piece], heldBytes + piece.length)
        held = []
        heldBytes = 0
      }
      start = end + 1
      yield line(piece)
    }
    if (start < bytes.length) {
      heldBytes += bytes.length - start
      // One byte over the limit may be the CR of a CRLF; three more the BOM of the first line.
      if (heldBytes > MAX_LINE_BYTES + 1 + (number === 1 ? BOM.length : 0)) throw tooLong(number)
      held.push(bytes.subarray(start))
    }
  }
  if (held.length) yield line(Buffer.concat(held, heldBytes))
}

const utf8 = new TextDecoder('utf-8', { fatal: true, ignoreBOM: true })

/** Where the first byte sequence that is not UTF-8 starts, or -1 (the error path only: not fast). */
export function invalidUtf8At(bytes: Uint8Array): number {
  for (let i = 0; i < bytes.length; ) {
    const lead = bytes[i] as number
    if (lead < 0x80) {
      i++
      continue
    }
    const length =
      lead >= 0xc2 && lead <= 0xdf
        ? 2
        : lead >= 0xe0 && lead <= 0xef
          ? 3
          : lead >= 0xf0 && lead <= 0xf4
            ? 4
            : 0
    if (length === 0) return i
    // The second byte's range excludes overlong forms, surrogates and code points past U+10FFFF.
    const low = lead === 0xe0 ? 0xa0 : lead === 0xf0 ? 0x90 : 0x80
    const high = lead === 0xed ? 0x9f : lead === 0xf4 ? 0x8f : 0xbf
    const second = bytes[i + 1]
    if (second === undefined || second < low || second > high) return i
    for (let k = 2; k < length; k++) {
      const next = bytes[i + k]
      if (next === undefined || (next & 0xc0) !== 0x80) return i
    }
    i += length
  }
  return -1
}

/**
 * The message for a line that is not UTF-8, naming the field whose name or value holds the first
 * bad byte when the line, with that byte marked, is a JSON object.
 */
function notUtf8(bytes: Buffer, lineNumber: number): string {
  const at = invalidUtf8At(bytes)
  if (at < 0) return `line ${lineNumber}: not valid UTF-8`
  const before = bytes.subarray(0, at).toString('utf8')
  const after = bytes.subarray(at + 1).toString('utf8')
  let marker = '\uE000'
  while (before.includes(marker) || after.includes(marker)) marker += '\uE000'
  let parsed: unknown
  try {
    parsed = JSON.parse(before + marker + after)
  } catch {
    // The bad byte is not inside a string, or the line is not JSON anyway.
  }
  if (typeof parsed === 'object' && parsed !== null && !Array.isArray(parsed)) {
    const { type } = parsed as { type?: unknown }
    const prefix = typeof type === 'string' && type in RECORD_SCHEMAS ? `${type}.` : ''
    for (const [field, value] of Object.entries(parsed)) {
      if (field.includes(marker)) return `line ${lineNumber}: a field name is not valid UTF-8`
      if (JSON.stringify(value).includes(marker))
        return `line ${lineNumber}: ${prefix}${field}: not valid UTF-8`
    }
  }
  return `line ${lineNumber}: not valid UTF-8 (byte ${at + 1} of the line)`
}

/** One line's bytes as text, or an error naming the line (and the field) when they are not UTF-8. */
function decodeLine(bytes: Buffer, lineNumber: number): string {
  try {
    return utf8.decode(bytes)
  } catch {
    throw new ImportError(notUtf8(bytes, lineNumber))
  }
}

/** One NDJSON line → its record type and its record (field names), or an error naming line and field. */
function parseLine(line: string, lineNumber: number): { type: RecordType; record: Record<string, unknown> } {
  let parsed: unknown
  try {
    parsed = JSON.parse(line)
  } catch {
    throw new ImportError(`line ${lineNumber}: not valid JSON`)
  }
  if (typeof parsed !== 'object' || parsed === null || Array.isArray(parsed)) {
    throw new ImportError(`line ${lineNumber}: not a JSON object`)
  }
  const { type } = parsed as { type?: unknown }
  if (typeof type !== 'string' || !(type in RECORD_SCHEMAS)) {
    throw new ImportError(`line ${lineNumber}: type: must be one of ${RECORD_TYPES.join(', ')}`)
  }
  const recordType = type as RecordType
  // PostgreSQL's text cannot hold NUL; JSON can only write it as an escape.
  if (line.includes('\\u0000')) {
    for (const [field, value] of Object.entries(parsed)) {
      if (typeof value === 'string' && value.includes('\u0000')) {
        throw new ImportError(`line ${lineNumber}: ${recordType}.${field}: must not contain NUL (\\u0000)`)
      }
    }
  }
  const result = RECORD_SCHEMAS[recordType].safeParse(parsed)
  if (!result.success) {
    const issue = result.error.issues[0]
    const field = issue?.code === 'unrecognized_keys' ? issue.keys.join(', ') : issue?.path.join('.')
    throw new ImportError(`line ${lineNumber}: ${recordType}.${field || '?'}: ${issue?.message ?? 'invalid'}`)
  }
  return { type: recordType, record: result.data }
}

/**
 * Streams NDJSON into the store in one transaction: every line is validated, chunks of lines go
 * through the bulk loader (COPY, set-based checks, one merge per type) while the next chunk is
 * parsed, and any bad line rejects the whole file with its line number and field. A later line
 * with the same key replaces an earlier one, as a second import would.
 */
export async function importNdjson(
  store: Store,
  input: Readable,
  { onProgress = () => {}, chunkLines = CHUNK_LINES }: ImportOptions = {},
): Promise<ImportSummary> {
  const counts: Partial<Record<RecordType, number>> = {}
  let lines = 0
  const { firstLoad } = await bulkLoad(
    store,
    { chunkRows: chunkLines, onChunk: (chunk) => onProgress(chunk.lastLine) },
    async (add) => {
      // Left open on a failure, as readline did: the caller owns the input.
      for await (const { bytes, number } of inputLines(input.iterator({ destroyOnReturn: false }))) {
        lines = number
        const line = decodeLine(bytes, number)
        if (line.trim() === '') continue
        const { type, record } = parseLine(line, number)
        counts[type] = (counts[type] ?? 0) + 1
        await add(type, number, record, true)
      }
    },
  )
  return { lines, counts, firstLoad }
}
