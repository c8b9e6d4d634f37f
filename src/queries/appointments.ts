import { NULLABLE_APPOINTMENT_FIELDS } from '../schemas/resources.js'
import type { Sql } from '../store/types.js'
import {
  fetchPage,
  type ItemField,
  iso,
  type Page,
  type PageRequest,
  type PageStatement,
  pageStatement,
  type TenantFilterOptions,
  tenantCondition,
} from './page.js'

export interface AppointmentFilters {
  readonly status?: string | undefined
  readonly customerId?: string | undefined
  readonly staffId?: string | undefined
  /** Inclusive lower bound on the start time. */
  readonly startDate?: string | undefined
  /** Inclusive upper bound on the start time. */
  readonly endDate?: string | undefined
}

/** An appointment item, in the contract's order: empty fields are left out, the nullable ones written as null. */
const FIELDS: readonly ItemField[] = (
  [
    ['id', 'r.id'],
    ['start', iso('r.start_at')],
    ['end', iso('r.end_at')],
    ['orgId', 'r.org_id'],
    ['customerId', 'r.customer_id'],
    ['staffId', 'r.staff_id'],
    ['serviceId', 'r.service_id'],
    ['status', 'r.status'],
    ['locationType', 'r.location_type'],
    ['resourceId', 'r.resource_id'],
    ['priceCents', 'r.price_cents'],
    ['currency', 'r.currency'],
    ['note', 'r.note'],
    ['paymentStatus', 'r.payment_status'],
    ['amountPaidCents', 'r.amount_paid_cents'],
    ['paymentKind', 'r.payment_kind'],
    ['paymentId', 'r.payment_id'],
    ['invoiceId', 'r.invoice_id'],
    ['requiresPayment', 'r.requires_payment'],
    ['confirmedAfterPayment', 'r.confirmed_after_payment'],
    ['dayKey', 'r.day_key'],
    ['createdAt', iso('r.created_at')],
    ['updatedAt', iso('r.updated_at')],
  ] as const
).map(([key, sql]) => ({ key, sql, nullable: NULLABLE_APPOINTMENT_FIELDS.has(key) }))

const FILTER_SQL: Readonly<Record<keyof AppointmentFilters, (n: number) => string>> = {
  status: (n) => `k.status = $${n}`,
  customerId: (n) => `k.customer_id = $${n}`,
  staffId: (n) => `k.staff_id = $${n}`,
  startDate: (n) => `k.start_at >= $${n}::timestamptz`,
  endDate: (n) => `k.start_at <= $${n}::timestamptz`,
}
const FILTER_NAMES = Object.keys(FILTER_SQL) as (keyof AppointmentFilters)[]

/** The page statement of active appointments of `orgId`, filters combined with AND, latest start first. */
export function appointmentsPage(
  orgId: string,
  filters: AppointmentFilters,
  options?: TenantFilterOptions,
): PageStatement {
  const params: unknown[] = [orgId]
  const conditions = [tenantCondition('k', options), 'k.is_active']
  for (const name of FILTER_NAMES) {
    const value = filters[name]
    if (value === undefined) continue
    params.push(value)
    conditions.push(FILTER_SQL[name](params.length))
  }
  return pageStatement({
    table: 'appointments',
    where: conditions.join(' AND '),
    params,
    orderBy: ['start_at', 'id'],
    fields: FIELDS,
  })
}

/** Active appointments of one organization, filters combined with AND, latest start first. */
export function listAppointments(
  sql: Sql,
  orgId: string,
  page: PageRequest,
  filters: AppointmentFilters,
  options?: TenantFilterOptions,
): Promise<Page> {
  return fetchPage(sql, appointmentsPage(orgId, filters, options), page)
}
