import { CUSTOMER } from '../schemas/descriptions.js'
import type { Sql, StoreAdapter, Tenant } from '../store/types.js'
import { fetchPage, itemFieldsOf, type Page, type PageRequest, type PageStatement, pageSql } from './page.js'
import { organizationCount, tenantCondition } from './sql.js'

/** A customer item, in the contract's order; empty fields are left out. */
const FIELDS = itemFieldsOf(CUSTOMER)

const PAGE_SQL = pageSql({
  table: 'customers',
  where: `${tenantCondition('k')} AND k.is_active`,
  paramCount: 1,
  orderBy: ['created_at', 'id'],
  fields: FIELDS,
  // Kept per organization by triggers (migration 004): exact, from the same snapshot.
  countText: organizationCount('customer_counts'),
  // Buckets of at most 2,000 customers in list order (migration 009): where a deep page starts.
  pieces: `SELECT c.lo_at, c.lo_id, c.n, c.lo_at AS from_at, c.lo_id AS from_id
    FROM list_buckets c WHERE ${tenantCondition('c')} AND c.list = 'customers'`,
})

/** The page statement of active customers of `tenant`, newest first (`createdAt DESC, id DESC`). */
export function customersPage(tenant: Tenant): PageStatement {
  return { ...PAGE_SQL, params: [tenant] }
}

/** Active customers of one organization, newest first. */
export function listCustomers(
  store: StoreAdapter,
  sql: Sql,
  tenant: Tenant,
  page: PageRequest,
): Promise<Page> {
  return fetchPage(store, sql, customersPage(tenant), page)
}
