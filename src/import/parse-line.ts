import { ImportError } from './errors.js'
import { RECORD_SCHEMAS } from './records.js'
import { RECORD_TYPES, type RecordType } from './tables.js'

/** One NDJSON line → its record type and its record (field names), or an error naming line and field. */
export function parseLine(
  line: string,
  lineNumber: number,
): { type: RecordType; record: Record<string, unknown> } {
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
