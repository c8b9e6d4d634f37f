import type { Customer } from '../schemas/resources.js'
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

const COLUMNS = `c.id, c.support_id AS "supportId", c.first_name AS "firstName", c.last_name AS "lastName",
  c.display_name AS "displayName", c.email, c.phone, c.primary_phone AS "primaryPhone",
  c.secondary_phone AS "secondaryPhone", c.preferred_contact_method AS "preferredContactMethod",
  to_char(c.date_of_birth, 'YYYY-MM-DD') AS "dateOfBirth", c.gender, c.notes,
  c.marketing_consent AS "marketingConsent", c.address_line1 AS "addressLine1", c.city, c.region,
  c.postal_code AS "postalCode", c.country, c.preferred_staff_id AS "preferredStaffId",
  c.is_active AS "isActive", ${iso('c.created_at')} AS "createdAt", ${iso('c.updated_at')} AS "updatedAt"`

function queries(options?: TenantFilterOptions) {
  const where = `${tenantCondition('k', options)} AND k.is_active`
  const count = `SELECT count(*)::int AS total FROM customers k WHERE ${where}`
  // The page's keys come from an index-only scan; only the page's rows are read from the heap.
  const page = `SELECT ${COLUMNS}, (${count}) AS total
    FROM (SELECT k.org_id, k.id FROM customers k WHERE ${where}
          ORDER BY k.created_at DESC, k.id DESC LIMIT $2 OFFSET $3) p
    JOIN customers c ON c.org_id = p.org_id AND c.id = p.id
    ORDER BY c.created_at DESC, c.id DESC`
  return { page, count }
}

const DEFAULT = queries()

/** Active customers of one organization, newest first (`createdAt DESC, id DESC`). */
export function listCustomers(
  sql: Sql,
  orgId: string,
  page: PageRequest,
  options?: TenantFilterOptions,
): Promise<Page<Customer>> {
  const text = options ? queries(options) : DEFAULT
  return fetchPage(sql, { pageSql: text.page, countSql: text.count, params: [orgId] }, page, (row) =>
    compact<Customer>(row),
  )
}
