import type { Sql, StoreAdapter } from '../store/types.js'
import {
  fetchPage,
  type ItemField,
  iso,
  type Page,
  type PageRequest,
  type PageStatement,
  pageSql,
  tenantCondition,
} from './page.js'

/** A customer item, in the contract's order; empty fields are left out. */
const FIELDS: readonly ItemField[] = [
  { key: 'id', sql: 'r.id' },
  { key: 'supportId', sql: 'r.support_id' },
  { key: 'firstName', sql: 'r.first_name' },
  { key: 'lastName', sql: 'r.last_name' },
  { key: 'displayName', sql: 'r.display_name' },
  { key: 'email', sql: 'r.email' },
  { key: 'phone', sql: 'r.phone' },
  { key: 'primaryPhone', sql: 'r.primary_phone' },
  { key: 'secondaryPhone', sql: 'r.secondary_phone' },
  { key: 'preferredContactMethod', sql: 'r.preferred_contact_method' },
  { key: 'dateOfBirth', sql: "to_char(r.date_of_birth, 'YYYY-MM-DD')" },
  { key: 'gender', sql: 'r.gender' },
  { key: 'notes', sql: 'r.notes' },
  { key: 'marketingConsent', sql: 'r.marketing_consent' },
  { key: 'addressLine1', sql: 'r.address_line1' },
  { key: 'city', sql: 'r.city' },
  { key: 'region', sql: 'r.region' },
  { key: 'postalCode', sql: 'r.postal_code' },
  { key: 'country', sql: 'r.country' },
  { key: 'preferredStaffId', sql: 'r.preferred_staff_id' },
  { key: 'isActive', sql: 'r.is_active' },
  { key: 'createdAt', sql: iso('r.created_at') },
  { key: 'updatedAt', sql: iso('r.updated_at') },
]

const PAGE_SQL = pageSql({
  table: 'customers',
  where: `${tenantCondition('k')} AND k.is_active`,
  paramCount: 1,
  orderBy: ['created_at', 'id'],
  fields: FIELDS,
  // Kept per organization by triggers (migration 004): exact, from the same snapshot.
  countText: `SELECT coalesce(sum(c.n), 0)::int AS total FROM customer_counts c WHERE ${tenantCondition('c')}`,
})

/** The page statement of active customers of `orgId`, newest first (`createdAt DESC, id DESC`). */
export function customersPage(orgId: string): PageStatement {
  return { ...PAGE_SQL, params: [orgId] }
}

/** Active customers of one organization, newest first. */
export function listCustomers(
  store: StoreAdapter,
  sql: Sql,
  orgId: string,
  page: PageRequest,
): Promise<Page> {
  return fetchPage(store, sql, customersPage(orgId), page)
}
