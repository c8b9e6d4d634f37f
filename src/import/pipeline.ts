import { Chunk } from './chunk.js'
import type { RecordType } from './tables.js'

/** Adds one row to the load; resolves at once unless a full chunk has to wait for the database. */
export type AddRow = (
  type: RecordType,
  line: number,
  row: Readonly<Record<string, unknown>>,
  byField?: boolean,
) => Promise<void>

export interface PipelineOptions {
  readonly chunkRows: number
  /** Called after each chunk is loaded: the progress of the load. */
  readonly onChunk?: (chunk: Chunk) => void
}

/**
 * `produce` adds rows in order, and every `chunkRows` rows the chunk goes to `load` while
 * `produce` goes on with the next one (the database and Node work at the same time; at most two
 * chunks are held in memory). Chunks are loaded one after the other, in order, and a failed
 * chunk is reported before any later error of `produce`.
 */
export async function pipeChunks(
  load: (chunk: Chunk) => Promise<void>,
  { chunkRows, onChunk = () => {} }: PipelineOptions,
  produce: (add: AddRow) => Promise<void>,
): Promise<void> {
  let inFlight: Promise<void> = Promise.resolve()
  let chunk = new Chunk()
  const send = async () => {
    await inFlight
    const full = chunk
    chunk = new Chunk()
    inFlight = load(full).then(() => onChunk(full))
    // Awaited at the next send, at the end, or before the producer's own error is reported.
    inFlight.catch(() => {})
  }
  const add: AddRow = async (type, line, row, byField) => {
    chunk.add(type, line, row, byField)
    if (chunk.rows >= chunkRows) await send()
  }
  try {
    await produce(add)
    await send()
  } catch (error) {
    await inFlight
    throw error
  }
  await inFlight
}
