import type { Store } from '../../src/store/types.js'
import { addAppointments, addCustomers, addStaff, createKey, createOrg } from '../helpers/fixtures.js'

export const STATUSES = ['scheduled', 'confirmed', 'checked_in', 'no_show', 'cancelled', 'completed'] as const

export interface Tenant {
  readonly id: string
  readonly key: string
  readonly customerIds: readonly string[]
  readonly staffIds: readonly string[]
  /**
   * The ids each id filter of the appointments (an `equals` filter on a field without enumerated
   * values) selects rows by, by parameter: the isolation test probes every one of them.
   */
  readonly filterIds: Readonly<Record<string, readonly string[]>>
}

/**
 * Three organizations with customers, staff and appointments in every status,
 * some inactive rows, spread over two years. Ids are unique per organization so
 * that a customer seen by the wrong key can be recognised by its id alone.
 */
export async function seedTenants(store: Store, ids: readonly string[] = ['org_t1', 'org_t2', 'org_t3']) {
  const tenants: Tenant[] = []
  for (const [n, id] of ids.entries()) {
    const org = await createOrg(store, id)
    const staffIds = [`stf_${id}_1`, `stf_${id}_2`]
    await addStaff(store, id, staffIds)
    const customerIds = Array.from({ length: 6 + n * 2 }, (_, i) => `cus_${id}_${i}`)
    await addCustomers(
      store,
      id,
      customerIds.map((cid, i) => ({
        id: cid,
        createdAt: new Date(Date.UTC(2025, i % 12, 1 + n, 9)).toISOString(),
        firstName: `First ${cid}`,
        email: `${cid}@example.test`,
        isActive: i !== 1,
      })),
    )
    await addAppointments(
      store,
      id,
      Array.from({ length: 18 + n * 3 }, (_, i) => ({
        id: `apt_${id}_${i}`,
        start: new Date(Date.UTC(2024 + (i % 2), i % 12, 1 + (i % 27), 8 + n)).toISOString(),
        status: STATUSES[i % STATUSES.length] as string,
        customerId: customerIds[i % customerIds.length],
        staffId: staffIds[i % staffIds.length],
        isActive: i % 7 !== 3,
      })),
    )
    const { key } = await createKey(store, org)
    tenants.push({
      id,
      key,
      customerIds,
      staffIds,
      filterIds: { customerId: customerIds, staffId: staffIds },
    })
  }
  return tenants
}
