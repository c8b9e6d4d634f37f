import { ImportError } from './errors.js'

/**
 * The longest line an import reads, in bytes without its line break: far more than any valid
 * record needs, far less than a JavaScript string can hold.
 */
export const MAX_LINE_BYTES = 1_048_576

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
