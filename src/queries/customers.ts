import { CUSTOMER } from '../schemas/descriptions.js'
import type { Tenant } from '../store/types.js'
import { itemFieldsOf, type PageStatement, PENDING_TOTAL, pageSql } from './page-statement.js'
import { tenantCondition } from './sql.js'

/** A customer item, in the contract's order; empty fields are left out. */
const FIELDS = itemFieldsOf(CUSTOMER)

/** The customers list's folded buckets (migration 013). */
const LIST = `${tenantCondition('c')} AND c.list = 'customers' AND c.filters = '{}'`

const PAGE_SQL = pageSql({
  table: 'customers',
  where: `${tenantCondition('k')} AND k.is_active`,
  paramCount: 1,
  orderBy: ['created_at', 'id'],
  fields: FIELDS,
  // Exact: the folded counts and the pending changes, from the same snapshot.
  countText: `SELECT ((SELECT coalesce(sum(c.n), 0) FROM buckets c WHERE ${LIST}) + ${PENDING_TOTAL})::int AS total`,
  // Buckets of at most 2,000 folded customers in list order: where a deep page starts.
  pieces: `SELECT c.lo_at, c.lo_id, c.n, c.lo_at AS from_at, c.lo_id AS from_id FROM buckets c WHERE ${LIST}`,
  // Every change not folded yet: the customers list has no filter.
  pending: 'p.delta <> 0',
})

/** The page statement of active customers of `tenant`, newest first (`createdAt DESC, id DESC`). */
export function customersPage(tenant: Tenant): PageStatement {
  return { ...PAGE_SQL, params: [tenant] }
}
