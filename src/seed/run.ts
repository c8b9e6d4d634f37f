import { bulkLoad } from '../import/loader.js'
import type { RecordType } from '../import/tables.js'
import type { Store } from '../store/types.js'
import { organizationRows, planOrganizations, type SyntheticPlan } from './synthetic.js'

export type Counts = Partial<Record<RecordType, number>>

export interface SeedProgress {
  readonly done: number
  readonly total: number
}

/** Rows per chunk handed to the bulk loader, as for an import. */
const CHUNK_ROWS = 25_000

/**
 * Writes a synthetic data set in one transaction through the import's bulk loader: all of it
 * or, on failure, none. Rows are generated while the previous chunk is being written.
 */
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
  // Generated rows have no file: their position in the stream stands in for a line number.
  let position = 0
  await bulkLoad(
    store,
    {
      chunkRows: CHUNK_ROWS,
      onChunk: (chunk) => {
        done += chunk.count('customer') + chunk.count('appointment')
        onProgress({ done, total })
      },
    },
    async (add) => {
      for (const org of organizations) {
        for (const batch of organizationRows(org.index, org.customers, org.appointments, plan)) {
          for (const row of batch.rows) await add(batch.type, ++position, row)
          counts[batch.type] = (counts[batch.type] ?? 0) + batch.rows.length
          if (batch.type === 'organization') orgIds.push(String(batch.rows[0]?.id))
        }
      }
    },
  )
  return { counts, orgIds }
}
