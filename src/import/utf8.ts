import { ImportError } from './errors.js'
import { RECORD_SCHEMAS } from './records.js'

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
export function decodeLine(bytes: Buffer, lineNumber: number): string {
  try {
    return utf8.decode(bytes)
  } catch {
    throw new ImportError(notUtf8(bytes, lineNumber))
  }
}
