import { type Appointment, NULLABLE_APPOINTMENT_FIELDS } from '../schemas/resources.js'
import type { Sql } from '../store/types.js'
import {
  compact,
  fetchPage,
  iso,
  type Page,
  type PageRequest,
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

const COLUMNS = `a.id, ${iso('a.start_at')} AS start, ${iso('a.end_at')} AS "end", a.org_id AS "orgId",
  a.customer_id AS "customerId", a.staff_id AS "staffId", a.service_id AS "serviceId", a.status,
  a.location_type AS "locationType", a.resource_id AS "resourceId", a.price_cents AS "priceCents",
  a.currency, a.note, a.payment_status AS "paymentStatus", a.amount_paid_cents AS "amountPaidCents",
  a.payment_kind AS "paymentKind", a.payment_id AS "paymentId", a.invoice_id AS "invoiceId",
  a.requires_payment AS "requiresPayment", a.confirmed_after_payment AS "confirmedAfterPayment",
  a.day_key AS "dayKey", ${iso('a.created_at')} AS "createdAt", ${iso('a.updated_at')} AS "updatedAt"`

const FILTER_SQL: Readonly<Record<keyof AppointmentFilters, (n: number) => string>> = {
  status: (n) => `k.status = $${n}`,
  customerId: (n) => `k.customer_id = $${n}`,
  staffId: (n) => `k.staff_id = $${n}`,
  startDate: (n) => `k.start_at >= $${n}::timestamptz`,
  endDate: (n) => `k.start_at <= $${n}::timestamptz`,
}
const FILTER_NAMES = Object.keys(FILTER_SQL) as (keyof AppointmentFilters)[]

/** Active appointments of one organization, filters combined with AND, newest start first. */
export function listAppointments(
  sql: Sql,
  orgId: string,
  page: PageRequest,
  filters: AppointmentFilters,
  options?: TenantFilterOptions,
): Promise<Page<Appointment>> {
  const params: unknown[] = [orgId]
  const conditions = [tenantCondition('k', options), 'k.is_active']
  for (const name of FILTER_NAMES) {
    const value = filters[name]
    if (value === undefined) continue
    params.push(value)
    conditions.push(FILTER_SQL[name](params.length))
  }
  const where = conditions.join(' AND ')
  const limitParam = params.length + 1
  const count = `SELECT count(*)::int AS total FROM appointments k WHERE ${where}`
  const pageSql = `SELECT ${COLUMNS}, (${count}) AS total
    FROM (SELECT k.org_id, k.id FROM appointments k WHERE ${where}
          ORDER BY k.start_at DESC, k.id DESC LIMIT $${limitParam} OFFSET $${limitParam + 1}) p
    JOIN appointments a ON a.org_id = p.org_id AND a.id = p.id
    ORDER BY a.start_at DESC, a.id DESC`
  return fetchPage(sql, { pageSql, countSql: count, params }, page, (row) =>
    compact<Appointment>(row, NULLABLE_APPOINTMENT_FIELDS),
  )
}
