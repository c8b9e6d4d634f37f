/**
 * The columns of the CSV output, in the contract's order, and `deletedAt` for tombstones (and
 * for appointments `leftWindowAt`, for rows that left the window).
 */
export const CUSTOMER_COLUMNS = [
  'id',
  'supportId',
  'firstName',
  'lastName',
  'displayName',
  'email',
  'phone',
  'primaryPhone',
  'secondaryPhone',
  'preferredContactMethod',
  'dateOfBirth',
  'gender',
  'notes',
  'marketingConsent',
  'addressLine1',
  'city',
  'region',
  'postalCode',
  'country',
  'preferredStaffId',
  'isActive',
  'createdAt',
  'updatedAt',
  'deletedAt',
] as const

export const APPOINTMENT_COLUMNS = [
  'id',
  'start',
  'end',
  'orgId',
  'customerId',
  'staffId',
  'serviceId',
  'status',
  'locationType',
  'resourceId',
  'priceCents',
  'currency',
  'note',
  'paymentStatus',
  'amountPaidCents',
  'paymentKind',
  'paymentId',
  'invoiceId',
  'requiresPayment',
  'confirmedAfterPayment',
  'dayKey',
  'createdAt',
  'updatedAt',
  'deletedAt',
  'leftWindowAt',
] as const

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
