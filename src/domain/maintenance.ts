import {
  COUNTERS,
  type MaintenanceRun,
  maintenancePass,
  type TableCounters,
} from '../store/embedded/embedded-autovacuum.js'
import { refreshStatistics } from '../store/schema/migrate.js'
import type { Store } from '../store/types.js'

export interface VacuumResult {
  readonly full: boolean
  readonly bytesBefore: number
  readonly bytesAfter: number
}

async function databaseBytes(store: Store): Promise<number> {
  const [row] = await store.admin((sql) =>
    sql.query<{ bytes: string }>('SELECT pg_database_size(current_database())::text AS bytes'),
  )
  return Number(row?.bytes ?? 0)
}

/**
 * Reclaims what deleted rows and failed or cancelled imports left behind; `full` rewrites the
 * tables (smaller files; reads wait meanwhile). Returns the database's size before and after.
 */
export async function vacuum(store: Store, full: boolean): Promise<VacuumResult> {
  const before = await databaseBytes(store)
  await store.maintain(full ? 'VACUUM (FULL, ANALYZE)' : 'VACUUM (ANALYZE)')
  // The embedded store's WAL is its DATA_DIR's too: a checkpoint lets it be recycled.
  if (store.kind === 'embedded') await store.maintain('CHECKPOINT')
  return { full, bytesBefore: before, bytesAfter: await databaseBytes(store) }
}

/**
 * After a bulk load (seed, import): fresh statistics for the next plans. PostgreSQL's autovacuum
 * vacuums the loaded tables in its own time; the embedded store has none, so the tables the load
 * made due are vacuumed and analyzed now, before the command returns (embedded-autovacuum.ts).
 */
export async function afterLoad(store: Store): Promise<MaintenanceRun[]> {
  if (store.kind !== 'embedded') {
    await refreshStatistics(store)
    return []
  }
  return maintenancePass({
    maintain: (statement) => store.maintain(statement),
    counters: () => store.admin((sql) => sql.query<TableCounters>(COUNTERS)),
  })
}
