import type { Readable } from 'node:stream'
import type { PlanRevocation } from '../domain/api-keys.js'
import type { Store } from '../store/types.js'
import { ImportError } from './errors.js'
import { inputLines } from './lines.js'
import { bulkLoad } from './loader.js'
import { parseLine } from './parse-line.js'
import type { RecordType } from './tables.js'
import { decodeLine } from './utf8.js'

export { ImportError } from './errors.js'
export { inputLines, MAX_LINE_BYTES } from './lines.js'
export { invalidUtf8At } from './utf8.js'

/** Lines per chunk: large enough for set-based statements, small enough to keep memory flat. */
const CHUNK_LINES = 25_000

export interface ImportOptions {
  /** Called after each chunk with the number of lines read and written so far. */
  readonly onProgress?: (lines: number) => void
  /** Lines per chunk (tests use small chunks to cross chunk boundaries). */
  readonly chunkLines?: number
  /** Told, within a second, when the import waits on another session's lock. */
  readonly onWait?: (line: string) => void
  /**
   * The longest wait for the input's next bytes (0: none): a producer that stays open without
   * writing (`(cat f; sleep 100) | openbook import -`) would hold the store, and on the embedded
   * store every request, for as long. Only the waits on the input count, not the database's work.
   */
  readonly idleMs?: number
}

/** The import stopped because its input sent nothing for `idleMs`; the transaction rolls back. */
export class InputIdleError extends ImportError {}

/** `source` as it yields, failing with `idle()` when a chunk takes longer than `ms` to come. */
async function* idleLimited<T>(source: AsyncIterator<T>, ms: number, idle: () => Error): AsyncGenerator<T> {
  for (;;) {
    let timer: NodeJS.Timeout | undefined
    const silence = new Promise<never>((_, reject) => {
      timer = setTimeout(() => reject(idle()), ms)
    })
    let next: IteratorResult<T>
    try {
      next = await Promise.race([source.next(), silence])
    } finally {
      clearTimeout(timer)
    }
    if (next.done) return
    yield next.value
  }
}

export interface ImportSummary {
  readonly lines: number
  readonly counts: Partial<Record<RecordType, number>>
  /** Tables loaded on the first-load path (indexes and foreign keys rebuilt at the end). */
  readonly firstLoad: string[]
  /**
   * Active keys revoked in the import's transaction: their organization's plan, as the file left
   * it, has no API access (free, starter). Empty when none.
   */
  readonly revokedKeys: PlanRevocation[]
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
  { onProgress = () => {}, chunkLines = CHUNK_LINES, idleMs = 0, onWait }: ImportOptions = {},
): Promise<ImportSummary> {
  const chunks: AsyncIterator<Buffer | string> = input.iterator({ destroyOnReturn: false })
  const source: AsyncIterable<Buffer | string> =
    idleMs > 0
      ? {
          [Symbol.asyncIterator]: () =>
            idleLimited(
              chunks,
              idleMs,
              () =>
                new InputIdleError(
                  `no input for ${idleMs / 1000} s, and the input is still open: the import was rolled back and nothing of it was written ` +
                    '(close the input when it is complete, or raise --idle-timeout)',
                ),
            ),
        }
      : { [Symbol.asyncIterator]: () => chunks }
  const counts: Partial<Record<RecordType, number>> = {}
  let lines = 0
  const { firstLoad, revokedKeys } = await bulkLoad(
    store,
    { chunkRows: chunkLines, onChunk: (chunk) => onProgress(chunk.lastLine), ...(onWait ? { onWait } : {}) },
    async (add) => {
      // Left open on a failure, as readline did: the caller owns the input.
      for await (const { bytes, number } of inputLines(source)) {
        lines = number
        const line = decodeLine(bytes, number)
        if (line.trim() === '') continue
        const { type, record } = parseLine(line, number)
        counts[type] = (counts[type] ?? 0) + 1
        await add(type, number, record, true)
      }
    },
  )
  return { lines, counts, firstLoad, revokedKeys }
}
