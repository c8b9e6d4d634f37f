import { createInterface } from 'node:readline'
import type { Readable } from 'node:stream'
import { RECORD_TYPES, type RecordType } from '../store/bulk.js'
import type { Store } from '../store/types.js'
import { bulkLoad, ImportError } from './loader.js'
import { RECORD_SCHEMAS } from './records.js'

export { ImportError } from './loader.js'

/** Lines per chunk: large enough for set-based statements, small enough to keep memory flat. */
const CHUNK_LINES = 25_000

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
  let lineNumber = 0
  const { firstLoad } = await bulkLoad(
    store,
    { chunkRows: chunkLines, onChunk: (chunk) => onProgress(chunk.lastLine) },
    async (add) => {
      for await (const line of createInterface({ input, crlfDelay: Number.POSITIVE_INFINITY })) {
        lineNumber++
        if (line.trim() === '') continue
        const { type, record } = parseLine(line, lineNumber)
        counts[type] = (counts[type] ?? 0) + 1
        await add(type, lineNumber, record, true)
      }
    },
  )
  return { lines: lineNumber, counts, firstLoad }
}
