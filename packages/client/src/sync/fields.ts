import { ITEM_FIELDS } from '../generated/api.js'
import { SyncUsageError } from './engine/errors.js'

/**
 * The columns of the CSV output: the item's fields in the contract's order, as the server's OpenAPI
 * document declares them (`ITEM_FIELDS`, generated with the types), and `deletedAt` for
 * tombstones (and for appointments `leftWindowAt`, for rows that left the window).
 */
export const CUSTOMER_COLUMNS = [...ITEM_FIELDS.Customer, 'deletedAt'] as const

export const APPOINTMENT_COLUMNS = [...ITEM_FIELDS.Appointment, 'deletedAt', 'leftWindowAt'] as const

/** RFC 4180: quoted when it holds a comma, a quote or a line break; a formula's lead character defused. */
export function csvField(value: unknown): string {
  if (value === undefined || value === null) return ''
  let text = typeof value === 'string' ? value : JSON.stringify(value)
  if (typeof value === 'string' && /^[=+\-@\t\r]/.test(text)) text = `'${text}`
  return /[",\r\n]/.test(text) ? `"${text.replace(/"/g, '""')}"` : text
}

export function csvLine(columns: readonly string[], row: Record<string, unknown>): string {
  return `${columns.map((column) => csvField(row[column])).join(',')}\r\n`
}

/**
 * Refuses a row with a field the CSV's columns do not have: the API may add fields within v1, and
 * a CSV of this version's columns would drop it silently. Checked before anything of its page is
 * written; the run exits 2 (usage: the same command fails again) with the fields named.
 */
export function checkCsvFields(columns: readonly string[], row: Record<string, unknown>, out: string): void {
  const added = Object.keys(row).filter((field) => !columns.includes(field))
  if (added.length === 0) return
  throw new SyncUsageError(
    `the API sends ${added.length === 1 ? 'a field' : 'fields'} this version's CSV columns lack (${added.join(', ')}), which ${out} would drop: write .ndjson or --pg, which keep every field, or use a version of openbook-sync that knows ${added.length === 1 ? 'it' : 'them'} (in a new file)`,
    'csv_new_field',
  )
}
