import { createApiKey } from '../domain/api-keys.js'
import { upsertRows } from '../import/tables.js'
import type { Store } from '../store/types.js'
import { organizationRows } from './synthetic.js'

export const DEMO_ORG_ID = 'org_demo'
const DEMO_OWNER = 'owner@demo.openbook.example'

/**
 * Seeds the demo organization into an empty store and returns a test key for
 * it; returns undefined when the store already holds an organization.
 */
export async function seedDemoIfEmpty(store: Store, brand: string): Promise<string | undefined> {
  return store.admin(async (sql) => {
    const [existing] = await sql.query('SELECT 1 FROM organizations LIMIT 1')
    if (existing) return undefined
    const plan = { orgs: 1, customers: 300, appointments: 600, seed: 1 }
    for (const batch of organizationRows(1, plan.customers, plan.appointments, plan)) {
      const rows = batch.rows.map((row) => renameDemo(batch.type, row))
      await upsertRows(sql, batch.type, rows)
    }
    // Its lists folded, as a load's are: a list of fewer entries than a writer's fold waits for
    // would keep every change pending, and every page read them all again.
    await sql.exec('SELECT list_fold_all()')
    const key = await createApiKey(sql, {
      orgId: DEMO_ORG_ID,
      actorEmail: DEMO_OWNER,
      env: 'test',
      name: 'demo',
      brand,
    })
    return key.key
  })
}

/** The generator names its organization after the seed; the demo has fixed, friendly names. */
function renameDemo(type: string, row: Record<string, unknown>): Record<string, unknown> {
  if (type === 'organization') return { ...row, id: DEMO_ORG_ID, name: 'Demo Studio', plan: 'enterprise' }
  if (type === 'user') return { ...row, id: 'usr_demo_owner', email: DEMO_OWNER, name: 'Demo Owner' }
  if (type === 'membership') return { ...row, org_id: DEMO_ORG_ID, user_id: 'usr_demo_owner' }
  return { ...row, org_id: DEMO_ORG_ID }
}
