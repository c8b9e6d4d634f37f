import { type RecordType, upsertRows } from '../store/bulk.js'
import type { Store } from '../store/types.js'
import { organizationRows, planOrganizations, type SyntheticPlan } from './synthetic.js'

export type Counts = Partial<Record<RecordType, number>>

export interface SeedProgress {
  readonly done: number
  readonly total: number
}

/** Writes a synthetic data set in one transaction: all of it or, on failure, none. */
export async function seedSynthetic(
  store: Store,
  plan: SyntheticPlan,
  onProgress: (progress: SeedProgress) => void = () => {},
): Promise<{ counts: Counts; orgIds: string[] }> {
  const organizations = planOrganizations(plan)
  const total = plan.customers + plan.appointments
  const counts: Counts = {}
  const orgIds: string[] = []
  let done = 0
  await store.admin(async (sql) => {
    for (const org of organizations) {
      for (const batch of organizationRows(org.index, org.customers, org.appointments, plan)) {
        await upsertRows(sql, batch.type, batch.rows)
        counts[batch.type] = (counts[batch.type] ?? 0) + batch.rows.length
        if (batch.type === 'organization') orgIds.push(String(batch.rows[0]?.id))
        if (batch.type === 'customer' || batch.type === 'appointment') {
          done += batch.rows.length
          onProgress({ done, total })
        }
      }
    }
  })
  return { counts, orgIds }
}
