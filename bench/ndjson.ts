import { once } from 'node:events'
import { createWriteStream } from 'node:fs'
import { syntheticLines } from './synthetic-lines.js'

export interface Written {
  readonly lines: number
  readonly bytes: number
  readonly counts: Record<string, number>
}

/**
 * Writes exactly `lines` NDJSON lines of realistic data: organizations with their owner,
 * staff and services, then customers and appointments, with the seed's skewed sizes.
 * Streams with back-pressure, so memory stays flat whatever the size.
 */
export async function writeNdjson(file: string, lines: number, seed: number): Promise<Written> {
  const out = createWriteStream(file)
  const counts: Record<string, number> = {}
  let written = 0
  let bytes = 0
  let chunk: string[] = []
  const flush = async () => {
    const text = `${chunk.join('\n')}\n`
    chunk = []
    bytes += Buffer.byteLength(text)
    if (!out.write(text)) await once(out, 'drain')
  }
  for (const { type, line } of syntheticLines(lines, seed)) {
    chunk.push(line)
    counts[type] = (counts[type] ?? 0) + 1
    written++
    if (chunk.length === 2_000) await flush()
  }
  if (chunk.length) await flush()
  out.end()
  await once(out, 'finish')
  return { lines: written, bytes, counts }
}
