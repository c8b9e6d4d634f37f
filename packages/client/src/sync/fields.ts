import { ITEM_FIELDS } from '../generated/api.js'

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
