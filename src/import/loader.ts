import { type PlanRevocation, revokeKeysWithoutApiAccess } from '../domain/api-keys.js'
import type { AdminSql, Store } from '../store/types.js'
import { checkStaged } from './checks.js'
import type { Chunk } from './chunk.js'
import { type Dropped, FIRST_LOAD_MIN_ROWS, prepareFirstLoad, rebuildDropped } from './first-load.js'
import { mergeStaged } from './merge.js'
import { type AddRow, type PipelineOptions, pipeChunks } from './pipeline.js'
import { clearStaging, copyToStaging, createStagingSql, keyLog, logParentKeys } from './staging.js'
import { sayTurnWait, sayWaits } from './waits.js'

export { Chunk } from './chunk.js'
export { ImportError } from './errors.js'
export { FIRST_LOAD_MIN_ROWS } from './first-load.js'
export type { AddRow } from './pipeline.js'

/**
 * The bulk path shared by `openbook import` and `openbook seed`.
 *
 * Rows arrive in chunks (pipeline.ts). Each chunk is copied (COPY, text format) into temporary
 * staging tables (staging.ts), checked with one set-based query (checks.ts: references inside one
 * organization, e-mail uniqueness), then merged into the real tables with one INSERT … SELECT …
 * ON CONFLICT per type, parents first (merge.ts). Everything happens in the caller's transaction:
 * all of it or nothing.
 *
 * A first load (at least FIRST_LOAD_MIN_ROWS records in the first chunk, and an empty customers or
 * appointments table) drops and rebuilds that table's indexes and foreign keys (first-load.ts).
 * It holds an exclusive lock on that table until the transaction ends, so it is taken only on a
 * store where no reader runs beside an operator transaction anyway (Store.concurrentReads false:
 * the embedded store). On PostgreSQL, other organizations keep reading (fast, correct, empty
 * pages) while one organization's first load runs.
 */
class BulkLoader {
  private readonly dropped: Dropped[] = []
  private chunks = 0

  private constructor(
    private readonly sql: AdminSql,
    private readonly firstLoadAllowed: boolean,
  ) {}

  /** Creates the staging tables (dropped at commit) in the caller's transaction. */
  static async begin(sql: AdminSql, firstLoadAllowed: boolean): Promise<BulkLoader> {
    const statements = [
      // The checks' hash joins and the first load's index builds stay in memory.
      "SET LOCAL work_mem = '64MB'",
      "SET LOCAL maintenance_work_mem = '256MB'",
      // The lists (migration 013): beside other sessions, each statement's entries go straight
      // into the buckets (no change rows to fold and leave dead); alone on the store (where the
      // first load drops the indexes a split steps along), they are folded at the end, with no
      // other session's pending changes to count.
      firstLoadAllowed
        ? "SELECT set_config('openbook.fold_alone', 'on', true)"
        : "SELECT set_config('openbook.fold', 'now', true)",
      ...createStagingSql(),
    ]
    await sql.exec(statements.join(';\n'))
    return new BulkLoader(sql, firstLoadAllowed)
  }

  /** Copies, checks and merges one chunk. */
  async load(chunk: Chunk): Promise<void> {
    const types = chunk.types()
    if (types.length === 0) return
    // A large first chunk means a large load: empty tables take the first-load path.
    if (this.chunks++ === 0 && this.firstLoadAllowed && chunk.rows >= FIRST_LOAD_MIN_ROWS)
      this.dropped.push(...(await prepareFirstLoad(this.sql)))
    await copyToStaging(this.sql, chunk, types)
    await logParentKeys(this.sql, types)
    await checkStaged(this.sql, types)
    await mergeStaged(this.sql, types, chunk.lastLine, new Set(this.dropped.map((d) => d.table)))
    await clearStaging(this.sql, types)
  }

  /**
   * Rebuilds what the first-load path dropped and names those tables; revokes the active keys of
   * the file's organizations whose plan (as the file left it) has no API access. Call once, after
   * the last chunk.
   */
  async finish(): Promise<BulkLoadResult> {
    const rebuilt = this.dropped.splice(0)
    await rebuildDropped(this.sql, rebuilt)
    const revokedKeys = await revokeKeysWithoutApiAccess(this.sql, `SELECT id FROM ${keyLog('organization')}`)
    // The load's changes of the lists, folded now, last: readers find them in the buckets, and
    // no writer's fold is left a load's worth of them (migration 013).
    await this.sql.exec('SELECT list_fold_all()')
    return { firstLoad: rebuilt.map((d) => d.table), revokedKeys }
  }
}

export interface BulkLoadResult {
  /** Tables loaded on the first-load path. */
  readonly firstLoad: string[]
  /** Keys revoked because the load moved their organization to a plan without API access. */
  readonly revokedKeys: PlanRevocation[]
}

/**
 * One bulk load in one operator transaction: `produce` adds rows in order and they are loaded
 * chunk by chunk while it goes on (pipeline.ts); the first-load path's indexes are rebuilt at the end.
 */
export async function bulkLoad(
  store: Store,
  options: PipelineOptions & { readonly onWait?: (line: string) => void },
  produce: (add: AddRow) => Promise<void>,
): Promise<BulkLoadResult> {
  const begun = options.onWait ? sayTurnWait(store, options.onWait) : () => {}
  return store
    .admin(async (sql) => {
      begun()
      const stopSaying = options.onWait ? await sayWaits(store, sql, options.onWait) : () => {}
      try {
        // A table-wide exclusive lock would stall every organization's reads where they run beside us.
        const loader = await BulkLoader.begin(sql, !store.concurrentReads)
        await pipeChunks((chunk) => loader.load(chunk), options, produce)
        return await loader.finish()
      } finally {
        stopSaying()
      }
    })
    .finally(begun)
}
