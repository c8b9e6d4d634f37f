import { CUSTOMER } from '../schemas/descriptions.js'
import type { Tenant } from '../store/types.js'
import { itemFieldsOf, type PageStatement, pageSql } from './page-statement.js'
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
  // The changes not folded yet, from the same snapshot as the buckets.
  ctes: `pr AS MATERIALIZED (SELECT p.at, p.id, p.delta FROM list_changes p
    WHERE ${tenantCondition('p')} AND p.list = 'customers' AND p.delta <> 0)`,
  // Exact: the folded counts and the pending changes.
  countText: `SELECT ((SELECT coalesce(sum(c.n), 0) FROM buckets c WHERE ${LIST})
    + (SELECT coalesce(sum(r.delta), 0) FROM pr r))::int AS total`,
  // Buckets of at most 2,000 folded customers in list order: where a deep page starts.
  pieces: `SELECT c.lo_at, c.lo_id, c.n, c.lo_at AS from_at, c.lo_id AS from_id FROM buckets c WHERE ${LIST}`,
  pending: 'pr',
})

/** The page statement of active customers of `tenant`, newest first (`createdAt DESC, id DESC`). */
export function customersPage(tenant: Tenant): PageStatement {
  return { ...PAGE_SQL, params: [tenant] }
}
