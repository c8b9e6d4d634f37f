/** The PostgreSQL target: a pass upserted into one table, keyed by organization and id. */
import { existsSync, rmSync, truncateSync, writeFileSync } from 'node:fs'
import type { Openbook } from '../../client.js'
import { OpenbookError } from '../../errors.js'
import type { Cursor } from '../../paginate.js'
import { asSyncError, SyncUsageError } from '../engine/errors.js'
import { NO_VERDICTS, resolveMissing, type Verdicts, verdictCounts } from '../engine/missing.js'
import {
  Checkpoints,
  INCOMPLETE_PASS,
  type PassWindow,
  type SyncOptions,
  type SyncSummary,
} from '../engine/options.js'
import {
  checkOrganization,
  checkPage,
  organizationOf,
  readPass,
  syncClient,
  unchangedSince,
  unchangedSummary,
  validatorOf,
} from '../engine/pass.js'
import {
  appendSynced,
  identityOf,
  idsLine,
  lockState,
  type Missing,
  openState,
  orgTag,
  readIds,
  readState,
  writeState,
} from '../engine/state.js'
import { windowOf } from '../engine/window.js'
import { withWarehouseRetries } from './pg-retry.js'
import {
  checkTable,
  loadPg,
  type PgClientConstructor,
  PgTargetError,
  pgFailure,
  quoteTable,
  REFUSALS,
} from './pg-table.js'

export { PgTargetError } from './pg-table.js'

export interface PgSyncOptions extends Omit<SyncOptions, 'out'> {
  /** A postgres:// connection string. It is never printed (it may hold a password). */
  readonly pg: string
  /** Default: `openbook_<resource>_<organization>`. A plain name or `schema.name`. */
  readonly table?: string | undefined
}

/**
 * One run of openbook-sync into PostgreSQL. Each page is upserted in one transaction (keyed by
 * `id`, with the pass that saw it), then the state file is replaced. A crash between the two
 * re-reads that page on the rerun and upserts the same rows again: no duplicate, no gap. When
 * the pass completes, rows that an earlier pass saw and this one did not get `deleted_at`;
 * an incomplete pass marks none.
 */
export function runPgSync(options: PgSyncOptions): Promise<SyncSummary> {
  // A warehouse blip is ridden out as the API's are: the run goes on from its last checkpoint.
  return withWarehouseRetries(options, (attempt) => asSyncError(attempt.signal, () => pgSync(attempt)))
}

async function pgSync(options: PgSyncOptions): Promise<SyncSummary> {
  const started = Date.now()
  const freshWindow = windowOf(options)
  if (options.table !== undefined) quoteTable(options.table)
  let databaseName: string
  try {
    const url = new URL(options.pg)
    if (url.protocol !== 'postgres:' && url.protocol !== 'postgresql:') throw new SyncUsageError(url.protocol)
    databaseName = decodeURIComponent(url.pathname.slice(1)) || 'postgres'
  } catch {
    throw new SyncUsageError('--pg must be a postgres://… URL')
  }
  if (!/^[A-Za-z0-9_.-]+$/.test(databaseName))
    throw new SyncUsageError('--pg: name the database with letters, digits, _ . or -')
  const Client = await loadPg()
  const { client, retries } = syncClient(options)
  // Each organization of a table keeps its own state: a table given with --table may hold several
  // (the default one is named after its organization already).
  const statePathOf = (tableName: string, orgId: string) =>
    options.statePath ??
    (options.table === undefined
      ? `openbook-sync.${databaseName}.${tableName}.state.json`
      : `openbook-sync.${databaseName}.${tableName}.${orgTag(orgId)}.state.json`)
  // An unchanged list costs one request given --state, else two: the organization's look-up names
  // the state (and the default table).
  const unchanged = async (statePath: string) => {
    const previous = readState(statePath)
    return previous && (await unchangedSince(client, options, previous))
      ? unchangedSummary(options, previous, options.table ?? statePath, 'pg', retries(), started)
      : undefined
  }
  if (options.statePath !== undefined) {
    const summary = await unchanged(options.statePath)
    if (summary) return summary
  }
  const orgId = await organizationOf(client, options.org, options.signal)
  const tableName = options.table ?? `openbook_${options.resource}_${orgTag(orgId)}`
  const table = quoteTable(tableName)
  const statePath = statePathOf(tableName, orgId)
  if (options.statePath === undefined) {
    const summary = await unchanged(statePath)
    if (summary) return { ...summary, out: tableName, requests: 2 }
  }
  const lock = lockState(statePath)
  try {
    return await pgPass(options, {
      Client,
      client,
      retries,
      started,
      freshWindow,
      databaseName,
      orgId,
      tableName,
      table,
      statePath,
    })
  } catch (error) {
    throw pgFailure(error)
  } finally {
    lock.release()
  }
}

interface PgRun {
  readonly Client: PgClientConstructor
  readonly client: Openbook
  readonly retries: () => number
  readonly started: number
  readonly freshWindow: PassWindow
  readonly databaseName: string
  readonly orgId: string
  readonly tableName: string
  readonly table: string
  readonly statePath: string
}

async function pgPass(options: PgSyncOptions, run: PgRun): Promise<SyncSummary> {
  const { Client, client, retries, started, freshWindow, databaseName, orgId, tableName, table, statePath } =
    run
  // The database and the table, not the host: the same database may be reached another way.
  const identity = identityOf(options, orgId, `pg:${databaseName}/${tableName}`)
  let state = openState(
    statePath,
    { version: 2, orgId, identity, completePass: 0, current: null },
    '--table (or --state)',
  )

  const db = new Client({ connectionString: options.pg, application_name: 'openbook-sync' })
  // A dropped connection fails the next query, which is reported in the server's words: the
  // driver's own ("not queryable") say nothing of why.
  let lost: Error | undefined
  db.on('error', (error) => {
    lost = error
  })
  try {
    await db.connect()
  } catch (error) {
    const code = String((error as { code?: unknown }).code ?? '')
    if (REFUSALS.test(code))
      throw new PgTargetError(`PostgreSQL refused the connection: ${(error as Error).message}`)
    throw error
  }

  try {
    await db.query(
      `create table if not exists ${table} (
         org_id text not null,
         id text not null,
         data jsonb not null,
         synced_at timestamptz not null,
         deleted_at timestamptz,
         left_window_at timestamptz,
         sync_pass integer not null,
         primary key (org_id, id)
       )`,
    )
    await db.query(`alter table ${table} add column if not exists left_window_at timestamptz`)
    await checkTable(db, table, tableName)
    const resumed = state.current !== null
    let current = state.current
    if (current === null) {
      // Pass numbers only grow, even if the state file was lost: older rows keep lower ones.
      const { rows } = await db.query(
        `select coalesce(max(sync_pass), 0)::int as pass from ${table} where org_id = $1`,
        [orgId],
      )
      const pass = Math.max(state.completePass, Number(rows[0]?.pass ?? 0)) + 1
      current = { pass, cursor: undefined, outBytes: 0, idsBytes: 0, rows: 0, window: freshWindow }
      state = { ...state, current }
      writeState(statePath, state)
    }
    const pass = current.pass
    const window = current.window ?? freshWindow
    // The pass's seen-set: the ids it read, in a file beside the state, appended after each commit
    // (a row that did not change is not written again; the set says it was seen). Whatever was
    // appended after the last saved state goes: those pages are read again from the cursor.
    const idsPath = (n: number) => `${statePath}.pass-${n}.ids`
    if (existsSync(idsPath(pass))) truncateSync(idsPath(pass), current.idsBytes)
    else writeFileSync(idsPath(pass), '')
    let idsBytes = current.idsBytes
    /** Ids of the pages in the open transaction: appended to the seen-set once it commits. */
    let pendingIds = ''
    // After a resume, the rows this pass saw already are not yielded again (a row moved since).
    const seen = current.cursor ? readIds(idsPath(pass)).keys() : []

    const paginator = readPass(options, client, current.cursor, window, seen)
    const checkpoints = Checkpoints.of(options)
    let rows = current.rows
    /** Rows written and committed this run, and those of the open transaction. */
    let written = 0
    let pendingWritten = 0
    let pages = 0
    let cursor: Cursor | undefined = current.cursor
    /** A transaction holds the pages since the last checkpoint; false when PostgreSQL failed. */
    let open = false
    let healthy = true
    /** Commits the pages so far, then saves where the pass stands. */
    const checkpoint = async () => {
      if (open) await db.query('commit')
      open = false
      written += pendingWritten
      pendingWritten = 0
      idsBytes += appendSynced(idsPath(pass), pendingIds)
      pendingIds = ''
      const etag = current?.etag ?? paginator.etag
      state = { ...state, current: { pass, cursor, outBytes: 0, idsBytes, rows, window, etag } }
      writeState(statePath, state)
      checkpoints.done()
    }
    try {
      for await (const page of paginator.pages()) {
        checkPage(page, orgId)
        try {
          if (!open) await db.query('begin')
          open = true
          // Only rows that changed (or come back) are written: an unchanged row is left as it is,
          // without a new row version, and the seen-set says this pass saw it.
          const upserted = await db.query(
            `insert into ${table} as t (org_id, id, data, synced_at, deleted_at, sync_pass)
             select $3, e->>'id', e, now(), null, $2 from jsonb_array_elements($1::jsonb) as e
             on conflict (org_id, id) do update
               set data = excluded.data, synced_at = excluded.synced_at, deleted_at = null,
                   left_window_at = null, sync_pass = excluded.sync_pass
               where t.data is distinct from excluded.data or t.deleted_at is not null
                  or t.left_window_at is not null`,
            // Rows moved since they were upserted come again as they are now: updated.
            [JSON.stringify([...page.data, ...page.moved]), pass, orgId],
          )
          pendingWritten += upserted.rowCount ?? 0
        } catch (error) {
          healthy = false
          throw error
        }
        pendingIds += page.data.map((row) => idsLine(row, options.resource)).join('')
        rows += page.data.length
        cursor = page.cursor
        if (checkpoints.page()) await checkpoint()
        options.onProgress?.({ rows, total: page.pagination.total, pass })
        if (options.stopAfterPages !== undefined && ++pages >= options.stopAfterPages && !page.cursor.done)
          break
      }
      await checkpoint()
    } catch (error) {
      // Reading failed (or was interrupted) after whole pages: commit and save them for the rerun.
      // When PostgreSQL failed, the transaction is lost: the rerun reads it again.
      if (healthy) await checkpoint().catch(() => {})
      else if (open) await db.query('rollback').catch(() => {})
      throw error
    }

    const summary = {
      resource: options.resource,
      orgId,
      out: tableName,
      format: 'pg' as const,
      pass,
      resumed,
      requests: paginator.stats.requests,
      rereads: paginator.stats.rereads,
      retries: retries(),
      checkpoints: checkpoints.count,
      window,
      moved: paginator.stats.moved,
    }
    if (!cursor?.done)
      return { ...summary, rows, written, ...INCOMPLETE_PASS, durationMs: Date.now() - started }

    // Complete. What became of the rows an earlier pass saw and this one did not
    // (resolveMissing): moved ones are written, ones outside the window marked left-window, ones
    // not decided kept as they are (the next pass checks them again), and only the ones certainly
    // no longer listed marked deleted. A row that the previous complete pass missed already was
    // kept by it (deferred): its seen-set says so.
    let verdicts: Verdicts = NO_VERDICTS
    const seenNow = readIds(idsPath(pass))
    const previous =
      state.completePass > 0 ? readIds(idsPath(state.completePass)) : new Map<string, Missing>()
    const missing = (
      await db.query(
        `select id, data->>'start' as start, data->>'customerId' as customer from ${table}
         where org_id = $1 and deleted_at is null and left_window_at is null and sync_pass <> $2`,
        [orgId, pass],
      )
    ).rows.filter((row) => !seenNow.has(String(row.id)))
    const checked = missing.length
    if (checked > 0) {
      verdicts = await resolveMissing(
        client,
        options,
        missing.map((row) => ({
          id: String(row.id),
          start: row.start === null ? undefined : String(row.start),
          customerId: row.customer === null ? undefined : String(row.customer),
          deferredSince: previous.get(String(row.id))?.deferredSince,
        })),
        window,
        current.etag ?? paginator.etag,
        pass,
        // The whole list in this run's one request: one statement's snapshot.
        !resumed && paginator.stats.requests === 1,
      )
      checkOrganization(verdicts.back, orgId)
    }
    await db.query('begin')
    let marked: { rows: Record<string, unknown>[] }
    let back = 0
    try {
      if (verdicts.back.length > 0) {
        const updated = await db.query(
          `update ${table} t set data = e, synced_at = now(), deleted_at = null, left_window_at = null,
             sync_pass = $2
           from jsonb_array_elements($1::jsonb) as e where t.org_id = $3 and t.id = e->>'id'`,
          [JSON.stringify(verdicts.back), pass, orgId],
        )
        back = updated.rowCount ?? 0
      }
      if (verdicts.left.length > 0)
        await db.query(
          `update ${table} set left_window_at = now() where org_id = $1 and id = any($2::text[])`,
          [orgId, verdicts.left],
        )
      marked = await db.query(
        `update ${table} set deleted_at = now()
         where org_id = $1 and id = any($2::text[]) and deleted_at is null returning id`,
        [orgId, verdicts.gone],
      )
      await db.query('commit')
    } catch (error) {
      await db.query('rollback').catch(() => {})
      throw error
    }
    appendSynced(
      idsPath(pass),
      [
        ...verdicts.back.map((row) => idsLine(row as { id: string }, options.resource)),
        ...verdicts.deferred.map((row) => idsLine(row, options.resource)),
      ].join(''),
    )
    // Rows left undecided are checked by the next pass: it must read, whatever the list did.
    const validator =
      verdicts.deferred.length === 0 ? validatorOf(options, state.current?.etag, window) : undefined
    writeState(statePath, { version: 2, orgId, identity, completePass: pass, current: null, validator })
    if (state.completePass > 0 && state.completePass !== pass)
      rmSync(idsPath(state.completePass), { force: true })
    return {
      ...summary,
      requests: summary.requests + verdicts.requests,
      // Counted from the seen-set, so a page read again after a crash is not counted twice.
      rows: seenNow.size + verdicts.back.length,
      written: written + back,
      ...verdictCounts(verdicts, checked),
      tombstones: marked.rows.length,
      durationMs: Date.now() - started,
    }
  } catch (error) {
    // The driver's code-less error of a session already lost: the loss, in the server's words.
    const driverAfterLoss =
      lost !== undefined &&
      !(error instanceof OpenbookError) &&
      !options.signal?.aborted &&
      (error as { code?: unknown } | undefined)?.code === undefined
    throw driverAfterLoss ? lost : error
  } finally {
    await db.end().catch(() => {})
  }
}
