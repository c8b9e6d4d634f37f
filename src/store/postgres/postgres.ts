import type pg from 'pg'
import { READER_ROLE, readerPreamble } from '../reader-settings.js'
import type { AdminSql, FoldReport, ReadOptions, Store, StoreAdapter } from '../types.js'
import { OPERATOR, type TransactionMode } from './connection.js'
import { PIPELINE_DEPTH } from './pipeline.js'
import {
  isConnectionLost,
  isConnectRefused,
  openDatabase,
  type PoolOptions,
  REPLICA_ROUND_TRIP_CAP_MS,
  REQUEST_DEADLINE_MS,
} from './pool.js'
import { type ReplicaEvents, ReplicaMonitor } from './replica.js'

/**
 * The PostgreSQL store: a primary (and a read replica, when there is one), each a pool of
 * connections (postgres/pool.ts) whose transactions run on one connection each
 * (postgres/connection.ts); the replica's lag watched (postgres/replica.ts).
 */

export { isStoreUnreachable, REQUEST_DEADLINE_MS } from './pool.js'
export type { ReplicaEvents, ReplicaState } from './replica.js'

export interface PostgresStoreOptions extends PoolOptions {
  readonly connectionString: string
  /** A streaming replica for the request path's reads (DATABASE_READ_URL); writes stay on the primary. */
  readonly readConnectionString?: string
  /** Reads fall back to the primary while the replica is further behind than this. */
  readonly maxReplicaLagMs?: number
  /**
   * How long a request may wait out a store that cannot be reached (a pooler or a server
   * restarting): connections are tried again, and a read-only request whose connection was lost
   * is run again, until then; then 503 with Retry-After.
   */
  readonly requestDeadlineMs?: number
  readonly statementTimeoutMs?: number
  /** Told when reads move off the replica or back to it, and of each read sent to the primary instead. */
  readonly replicaEvents?: ReplicaEvents
}

/** The readiness check's round trips (readiness.ts checks every second and waits at most 2 s). */
const PROBE_ROUND_TRIP_CAP_MS = 1_500

/**
 * The background fold's transaction (list_fold_pending, migration 017): READ COMMITTED and read-write
 * whatever the database's or the role's defaults, as the reader role, under its own limits: the
 * longest fold counts a list again from all its rows (list_build), so its statement may take longer
 * than a request's.
 */
const FOLD_STATEMENT_TIMEOUT_MS = 30_000
const FOLDING: TransactionMode = {
  preamble:
    'SET TRANSACTION ISOLATION LEVEL READ COMMITTED, READ WRITE; ' +
    `SELECT set_config('role', '${READER_ROLE}', true), ` +
    `set_config('statement_timeout', '${FOLD_STATEMENT_TIMEOUT_MS}', true), set_config('lock_timeout', '1000', true)`,
  request: false,
  readOnly: false,
}
/** too_many_connections: the server's, the role's or the database's connection limit is reached. */
const isOutOfConnections = (error: unknown) => (error as { code?: unknown }).code === '53300'

/** On PostgreSQL the database is the busier side: pages come back as rows, Node writes the JSON. */
const POSTGRES_ADAPTER: StoreAdapter = { pageForm: 'rows' }

const stats = (database: string, pool: pg.Pool) => ({
  database,
  total: pool.totalCount,
  idle: pool.idleCount,
  waiting: pool.waitingCount,
})

export function createPostgresStore(options: PostgresStoreOptions): Store {
  const timeout = options.statementTimeoutMs ?? 5_000
  const deadlineMs = options.requestDeadlineMs ?? REQUEST_DEADLINE_MS
  // Each pool meets the pooler on its own (the primary's, the replica's): the operator is told once.
  let poolerReported = false
  const onPoolerDetected = (detail: string) => {
    if (poolerReported) return
    poolerReported = true
    options.onPoolerDetected?.(detail)
  }
  const poolOptions: PostgresStoreOptions = {
    ...options,
    onPoolerDetected,
    pipelineDepth: options.pipelineDepth ?? PIPELINE_DEPTH,
  }
  const primary = openDatabase(options.connectionString, poolOptions, {
    retryForMs: deadlineMs,
    roundTripCapMs: deadlineMs,
    capEveryTransaction: false,
  })
  // The readiness check's own connection: a probe never waits for a slot behind requests, and
  // gives up within its cap, where a request would wait an outage out.
  const probe = openDatabase(
    options.connectionString,
    { ...poolOptions, maxConnections: 1 },
    { retryForMs: 0, roundTripCapMs: PROBE_ROUND_TRIP_CAP_MS, capEveryTransaction: true },
  )
  // The background fold's own connection to the primary: it never takes a request's slot, and a
  // request never waits behind a fold.
  const folder = openDatabase(
    options.connectionString,
    { ...poolOptions, maxConnections: 1 },
    { retryForMs: 0, roundTripCapMs: FOLD_STATEMENT_TIMEOUT_MS + 5_000, capEveryTransaction: true },
  )
  const replica = options.readConnectionString
    ? openDatabase(options.readConnectionString, poolOptions, {
        retryForMs: 0,
        roundTripCapMs: Math.min(REPLICA_ROUND_TRIP_CAP_MS, deadlineMs),
        capEveryTransaction: true,
      })
    : undefined
  const monitor = replica
    ? new ReplicaMonitor(primary, replica, options.maxReplicaLagMs ?? 5_000, options.replicaEvents)
    : undefined
  const reading: TransactionMode = { preamble: readerPreamble(true, timeout), request: true, readOnly: true }
  const readingOneMessage: TransactionMode = { ...reading, oneMessage: true }
  const recording: TransactionMode = {
    preamble: readerPreamble(false, timeout),
    request: false,
    readOnly: false,
  }

  /**
   * The request path on the replica while it is up and close enough behind, else on the primary.
   * A read that cannot even begin on the replica (refused, gone) moves to the primary at once:
   * nothing of it has run, and the replica is marked down until the monitor sees it back.
   */
  async function read<T>(work: (sql: AdminSql) => Promise<T>, how?: ReadOptions): Promise<T> {
    const mode = how?.oneMessage ? readingOneMessage : reading
    if (!replica || !monitor) return primary.transaction(mode, work)
    const state = monitor.state
    if (state !== 'ok') {
      options.replicaEvents?.fellBack(state)
      return primary.transaction(mode, work)
    }
    // A read lost on the replica, even part-way, runs again on the primary: it wrote nothing.
    try {
      return await replica.transaction(mode, work)
    } catch (error) {
      if (!(isConnectionLost(error) || isConnectRefused(error))) throw error
      monitor.markDown(error)
      options.replicaEvents?.fellBack('down')
      return primary.transaction(mode, work)
    }
  }

  return {
    kind: 'postgres',
    adapter: POSTGRES_ADAPTER,
    concurrentReads: true,
    read,
    // Last-used writes, the CLI and migrations stay on the primary.
    asReader: (work) => primary.transaction(recording, work),
    admin: (work) => primary.transaction(OPERATOR, work),
    async maintain(statement) {
      await primary.pool.query(statement)
    },
    foldLists: () =>
      folder.transaction(FOLDING, async (sql): Promise<FoldReport> => {
        const [row] = await sql.query<{
          folded: number
          most_pending: string
          all_pending: string
          failed: number
          failure: string | null
        }>('SELECT folded, most_pending, all_pending, failed, failure FROM list_fold_pending()')
        return {
          folded: row?.folded ?? 0,
          mostPending: Number(row?.most_pending ?? 0),
          allPending: Number(row?.all_pending ?? 0),
          failed: row?.failed ?? 0,
          ...(row?.failure ? { failure: row.failure } : {}),
        }
      }),
    async probe(work) {
      try {
        return await probe.transaction(OPERATOR, work)
      } catch (error) {
        // The check's own connection found no slot (max_connections, or the role's or the
        // database's CONNECTION LIMIT), while the requests' pool holds an idle connection: the
        // check runs there, as the next request would. Otherwise readiness would say the store
        // is unreachable while this instance serves every request.
        if (!isOutOfConnections(error) || primary.pool.idleCount === 0) throw error
        return primary.transaction(OPERATOR, work)
      }
    },
    pools: () => [stats('primary', primary.pool), ...(replica ? [stats('replica', replica.pool)] : [])],
    ...(monitor ? { replicaLagSeconds: () => monitor.lagSeconds } : {}),
    async close() {
      monitor?.stop()
      await Promise.all([primary.pool.end(), probe.pool.end(), folder.pool.end(), replica?.pool.end()])
    },
  }
}
