/**
 * What PostgreSQL's autovacuum would do, for the embedded store, which has none (PGlite runs no
 * background workers). Without it, a loaded store is slow until someone vacuums it: the rows a
 * load's fold deleted from list_changes stay behind as dead tuples that every page's count of
 * pending changes steps over (bench/RESULTS.md, "Embedded store at a million appointments").
 *
 * The rule is autovacuum's own, with its default thresholds: a table is vacuumed when its dead
 * tuples pass 50 + 20% of its rows, or its inserts since the last vacuum 1,000 + 20% (which sets
 * the visibility map that index-only scans rely on), and analyzed when its changes since the last
 * analyze pass 50 + 10%. PGlite keeps these counters only while a process runs (they are not
 * written at close), so a table whose visibility map covers less than half its pages is vacuumed
 * too: that catches what a previous process, or a crash, left.
 */

export interface Thresholds {
  readonly vacuumBase: number
  readonly vacuumScale: number
  readonly insertBase: number
  readonly insertScale: number
  readonly analyzeBase: number
  readonly analyzeScale: number
  /** Tables of fewer pages are left to their counters alone (a few pages are read whole anyway). */
  readonly visibilityMinPages: number
}

/** PostgreSQL's defaults (autovacuum_vacuum_threshold, …_scale_factor, and the insert and analyze ones). */
export const AUTOVACUUM_DEFAULTS: Thresholds = {
  vacuumBase: 50,
  vacuumScale: 0.2,
  insertBase: 1_000,
  insertScale: 0.2,
  analyzeBase: 50,
  analyzeScale: 0.1,
  visibilityMinPages: 16,
}

/** One table's counters, as COUNTERS reads them. */
export interface TableCounters {
  readonly table: string
  readonly rows: number
  readonly pages: number
  readonly visiblePages: number
  readonly deadRows: number
  readonly insertedSinceVacuum: number
  readonly changedSinceAnalyze: number
}

export type MaintenanceStatement = 'VACUUM (ANALYZE)' | 'ANALYZE'

/** What a table is due for, if anything. */
export function dueStatement(
  table: TableCounters,
  thresholds: Thresholds = AUTOVACUUM_DEFAULTS,
): MaintenanceStatement | undefined {
  const rows = Math.max(0, table.rows)
  const vacuum =
    table.deadRows > thresholds.vacuumBase + thresholds.vacuumScale * rows ||
    table.insertedSinceVacuum > thresholds.insertBase + thresholds.insertScale * rows ||
    (table.pages >= thresholds.visibilityMinPages && table.visiblePages < table.pages / 2)
  if (vacuum) return 'VACUUM (ANALYZE)'
  if (table.changedSinceAnalyze > thresholds.analyzeBase + thresholds.analyzeScale * rows) return 'ANALYZE'
  return undefined
}

/**
 * The counters of openbook's own tables (those of its schema and owner, as refreshStatistics
 * picks them). Read in a transaction after FLUSH_COUNTERS has run in one of its own: PGlite's
 * backend reports its counters only when asked to.
 */
export const COUNTERS = `
  SELECT format('%I.%I', n.nspname, c.relname) AS table,
         greatest(c.reltuples, 0)::float8 AS rows,
         c.relpages AS "pages",
         c.relallvisible AS "visiblePages",
         coalesce(s.n_dead_tup, 0)::float8 AS "deadRows",
         coalesce(s.n_ins_since_vacuum, 0)::float8 AS "insertedSinceVacuum",
         coalesce(s.n_mod_since_analyze, 0)::float8 AS "changedSinceAnalyze"
  FROM pg_class c
  JOIN pg_namespace n ON n.oid = c.relnamespace
  JOIN pg_class m ON m.oid = to_regclass('public.openbook_schema_migrations')
  LEFT JOIN pg_stat_user_tables s ON s.relid = c.oid
  WHERE c.relnamespace = m.relnamespace AND c.relowner = m.relowner AND c.relkind = 'r'
  ORDER BY 1`

export const FLUSH_COUNTERS = 'SELECT pg_stat_force_next_flush()'

/** One statement a pass ran. */
export interface MaintenanceRun {
  readonly table: string
  readonly statement: MaintenanceStatement
  readonly ms: number
}

export interface PassAccess {
  /** Runs a statement outside any transaction (Store.maintain). */
  maintain(statement: string): Promise<void>
  /** Reads COUNTERS in a transaction. */
  counters(): Promise<TableCounters[]>
  /** Awaited before each table's statement: the scheduled pass waits here for an idle moment. */
  beforeEach?(): Promise<void>
  /** Told as each table's statement begins: it is queued then, and whatever comes after waits for it. */
  begun?(table: string, statement: MaintenanceStatement): void
}

/**
 * Vacuums or analyzes each table that is due, one statement per table, each in its own turn: a
 * request that comes meanwhile waits for the one table's statement that runs, not for the pass.
 */
export async function maintenancePass(
  access: PassAccess,
  thresholds: Thresholds = AUTOVACUUM_DEFAULTS,
): Promise<MaintenanceRun[]> {
  await access.maintain(FLUSH_COUNTERS)
  const due = (await access.counters()).flatMap((table) => {
    const statement = dueStatement(table, thresholds)
    return statement ? [{ table: table.table, statement }] : []
  })
  const runs: MaintenanceRun[] = []
  for (const { table, statement } of due) {
    await access.beforeEach?.()
    const started = performance.now()
    const done = access.maintain(`${statement} ${table}`)
    access.begun?.(table, statement)
    await done
    runs.push({ table, statement, ms: Math.round(performance.now() - started) })
  }
  return runs
}
