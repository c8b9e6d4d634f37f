import { setTimeout as sleep } from 'node:timers/promises'
import pg from 'pg'
import type { PreparedStatements } from '../../config.js'
import { techniques } from '../../techniques.js'
import { CommitOutcomeUnknownError, PoolExhaustedError } from '../busy.js'
import { isPoolerSymptom, isPreparedStatementMissing } from '../one-trip.js'
import { isDiskFull } from '../open-failure.js'
import type { AdminSql } from '../types.js'
import {
  type Database,
  RoundTripTimeout,
  TransactionConnection,
  type TransactionMode,
  within,
} from './connection.js'
import { ConnectionSharing, type Lease } from './pipeline.js'
import { reconnector } from './reconnect.js'
import { rowTap } from './row-tap.js'

/**
 * A pool of connections to one PostgreSQL server and its transactions: connections tried again
 * while the server (or its pooler) restarts, requests run again when their connection is lost
 * before they wrote, and prepared statements that meet a pooler switched to `pooler`.
 */

/** What a pool of one database needs to know of the store's options (PostgresStoreOptions). */
export interface PoolOptions {
  readonly maxConnections?: number
  /** A connection idle this long in the pool is closed (0: never); IDLE_TIMEOUT_MS by default. */
  readonly idleTimeoutMs?: number
  /**
   * How the request path's statements are prepared (config.ts, `PREPARED_STATEMENTS`): `on` (the
   * default) once per connection, the page by SQL-level PREPARE (one-trip.ts); `pooler` once per
   * server connection, checked by the database, for PgBouncer in transaction mode of any version
   * (1.21's tracking is protocol-level only); `off`, never.
   */
  readonly preparedStatements?: PreparedStatements
  /**
   * Told once when prepared statements `on` met a pooler in transaction mode (isPoolerSymptom):
   * the store has switched to `pooler` and run the request again.
   */
  readonly onPoolerDetected?: (detail: string) => void
  /** Called for errors of idle pooled connections (a restarted server, a terminated backend). */
  readonly onIdleError?: (error: Error) => void
  /**
   * How many read-only requests of one turn of the event loop may share a connection, their
   * messages pipelined (pipeline.ts); 1: each its own. Only with prepared statements `on`.
   */
  readonly pipelineDepth?: number
}

export const REQUEST_DEADLINE_MS = 8_000
/**
 * Idle pooled connections are closed after this long (DATABASE_IDLE_TIMEOUT_MS): the connections a
 * burst opened go back to the server within seconds, for the other instances and clients that
 * share its max_connections, and a steady load keeps the ones it uses.
 */
export const IDLE_TIMEOUT_MS = 10_000
/** The least time a round trip of a request gets, however little of its deadline is left; a page takes milliseconds. */
const MIN_ROUND_TRIP_MS = 250
/** pg-pool's words for a connection request that waited its whole connectionTimeoutMillis in the pool's queue. */
const QUEUE_TIMEOUT = 'timeout exceeded when trying to connect'
/**
 * A round trip to the replica that takes longer ends there and the read moves to the primary: a
 * page takes milliseconds, and a replica that stopped leaves its reads queued in the pooler.
 */
export const REPLICA_ROUND_TRIP_CAP_MS = 2_000

/** A wait for a connection that ran out: the request's deadline, or pg-pool's own queue timeout. */
const isWaitTimeout = (error: unknown) =>
  error instanceof RoundTripTimeout || (error as Error).message === QUEUE_TIMEOUT

/** SQLSTATEs of a session the server ended: admin_shutdown, crash_shutdown, cannot_connect_now. */
const SESSION_ENDED = new Set(['57P01', '57P02', '57P03'])
/** Socket errors of a connection that is gone. */
const SOCKET_GONE = new Set(['ECONNRESET', 'EPIPE', 'ETIMEDOUT'])

/**
 * Whether an error says the connection is gone (the server ended the session, the socket closed)
 * rather than that the statement failed: node-postgres gives the server's FATAL (57P01 for
 * pg_terminate_backend), the socket's error, or one of its own messages for a closed connection.
 */
export function isConnectionLost(error: unknown): boolean {
  if (!(error instanceof Error)) return false
  const code = (error as { code?: unknown }).code
  if (
    typeof code === 'string' &&
    (SESSION_ENDED.has(code) || SOCKET_GONE.has(code) || code.startsWith('08'))
  ) {
    return true
  }
  return (
    error.message.startsWith('Connection terminated') ||
    error.message === 'Client has encountered a connection error and is not queryable'
  )
}

/**
 * How long a request may wait on one database: `deadlineMs` in all, each round trip at most
 * `roundTripCapMs`. The primary waits out a short outage (the request deadline); the replica gives
 * up at once and within a cap, as the primary can serve instead.
 */
export interface Patience {
  /** How long refused and lost connections are tried again. */
  readonly retryForMs: number
  readonly roundTripCapMs: number
  /** The cap holds for every transaction (the replica's lag probe too), not only the request path's. */
  readonly capEveryTransaction: boolean
}

export function openDatabase(connectionString: string, options: PoolOptions, patience: Patience): Database {
  const { retryForMs, roundTripCapMs, capEveryTransaction } = patience
  const maxConnections = options.maxConnections ?? 10
  // `on` becomes `pooler` for good at the first sign of a pooler in transaction mode.
  let prepare = options.preparedStatements ?? 'on'
  const pool = new pg.Pool({
    ...(rowTap ? { Client: rowTap.Client } : {}),
    connectionString,
    max: maxConnections,
    connectionTimeoutMillis: 5_000,
    idleTimeoutMillis: options.idleTimeoutMs ?? IDLE_TIMEOUT_MS,
  })
  // Without a listener an idle connection's error would crash the process.
  pool.on('error', (error) => options.onIdleError?.(error))
  /** Connections established (pg-pool counts those still connecting in totalCount too). */
  const established = new Set<unknown>()
  /**
   * When the database last answered this pool (a transaction's work came back, a connection
   * opened).
   */
  let answeredAt = 0
  pool.on('connect', (client) => {
    established.add(client)
    answeredAt = Date.now()
  })
  pool.on('remove', (client) => established.delete(client))
  /**
   * A connection request that waited in vain while the database answers and the requests
   * outnumber the connections (overload): every connection of the pool established and in use,
   * or the request queued behind such a pool (`crowded`) and the database answered since it came
   * (`since`), while the pool replaced a connection closed by a round trip that ran out under that
   * load. A pool whose connections are still connecting, or are gone, with no answer since, is the
   * store's trouble instead.
   */
  const exhausted = (error: unknown, crowded: boolean, since: number) =>
    isWaitTimeout(error) &&
    ((established.size >= maxConnections && pool.idleCount === 0) || (crowded && answeredAt >= since))
  /** Connections that have begun a transaction before: the ones that have sat idle in the pool. */
  const reused = new WeakSet<pg.PoolClient>()

  /** A connection the server or its pooler would not take or keep: tried again until the deadline. */
  const isRefusal = (error: unknown) => isConnectRefused(error) || isConnectionLost(error)
  const untilBack = reconnector(pool, isRefusal)
  const depth = options.pipelineDepth ?? 1
  const sharing = depth > 1 ? new ConnectionSharing(depth) : undefined

  /**
   * A connection from the pool. A refused connection (a pooler or server restarting: PgBouncer is
   * gone for a second or more during a restart) is tried again until `deadline`, all the requests
   * waiting together (reconnect.ts), before the request is answered 503: nothing of the
   * transaction has run yet.
   */
  async function connect(
    deadline: number,
    answerBy: number | undefined,
    crowded: boolean,
  ): Promise<pg.PoolClient> {
    const since = Date.now()
    for (;;) {
      try {
        // A connection that hangs (a peer that stopped answering) counts against the deadline too.
        return await (answerBy === undefined
          ? pool.connect()
          : within(pool.connect(), answerBy - Date.now(), (late) => late.release()))
      } catch (error) {
        if (exhausted(error, crowded, since))
          throw new PoolExhaustedError(maxConnections, Date.now() - since, pool.waitingCount)
        if (error instanceof RoundTripTimeout) throw error
        if (!isRefusal(error) || deadline <= Date.now()) throw error
        // Then one last try at the deadline itself.
        await untilBack(deadline)
      }
    }
  }

  async function transaction<T>(mode: TransactionMode, work: (sql: AdminSql) => Promise<T>): Promise<T> {
    // A backend that dies while its connection is idle (pg_terminate_backend, a restarted server)
    // is noticed by the pool only once its error has been read off the socket; until then the pool
    // still hands the connection out, and the round trip that carries BEGIN is the one that fails.
    // Nothing of the transaction has happened then (BEGIN, its settings and at most a read), so the
    // connection is discarded and the transaction starts again on another one. All the idle
    // connections may have died at once: after `maxConnections` discards the pool has none left and
    // opens a new one. A new connection that fails is not retried (the server is refusing
    // sessions), and nothing is retried once a round trip of the transaction has come back.
    // Behind a pooler, a server connection whose prepared statements were dropped while its session
    // setting still marks them prepared (a reset by DEALLOCATE ALL alone) answers "prepared statement
    // does not exist": the read-only request is run again once, its statements checked in
    // pg_prepared_statements (`recheck`).
    // A read-only request whose connection is lost after it was answered (a pooler or server
    // restarting under it) is run again on a new connection until the deadline: it wrote nothing.
    let recheck = false
    const deadline = Date.now() + retryForMs
    const answerBy = Date.now() + Math.max(retryForMs, roundTripCapMs)
    for (let attempt = 1; ; attempt++) {
      const attemptPrepare = prepare
      const capped = mode.request || capEveryTransaction
      // Every connection established and in use: this request waits in the pool's queue.
      const crowded = established.size >= maxConnections && pool.idleCount === 0
      const waitFrom = Date.now()
      const take = () => connect(deadline, capped ? answerBy : undefined, crowded)
      // A one-trip read may share its connection with the other requests of its turn.
      const lease: Lease | undefined =
        sharing &&
        mode.oneMessage &&
        mode.request &&
        mode.readOnly &&
        attemptPrepare === 'on' &&
        techniques.oneTrip
          ? await sharing.acquire(take)
          : undefined
      const client = lease?.client ?? (await take())
      const queuedMs = crowded ? Date.now() - waitFrom : 0
      const wasIdle = reused.has(client)
      const connection = new TransactionConnection(
        client,
        mode,
        attemptPrepare,
        recheck,
        () => reused.add(client),
        // A round trip begun just before the deadline (after a wait in the pool's queue) still gets
        // MIN_ROUND_TRIP_MS: cut off at once, it would be told as a lost connection (08006), and
        // its connection closed, under a load that already has too few.
        capped
          ? () => Math.min(roundTripCapMs, Math.max(MIN_ROUND_TRIP_MS, answerBy - Date.now()))
          : undefined,
        lease !== undefined,
      )
      // A backend that dies while the connection is checked out emits 'error' on the client, which the
      // pool listens for only while it is idle: unheard, it would crash the process. The query in flight
      // rejects with the same error, so here the connection is only marked as not to be reused.
      const onCheckedOutError = () => {
        connection.broken = true
      }
      client.on('error', onCheckedOutError)
      let released = false
      try {
        if (!mode.request) await connection.sendOwed()
        const result = await work(connection.sql)
        answeredAt = Date.now()
        await connection.flush()
        // BEGIN owed (again): no transaction is open, as after a request whose one message was its
        // own transaction (connection.ts, `implicit`).
        if (connection.owed === undefined) {
          if (mode.request && mode.readOnly) {
            // A read-only COMMIT changes nothing: the client's queue sends it before anything the
            // connection's next user asks, and a failure shows there (a dead connection is retried).
            client.query('COMMIT').catch(() => undefined)
            client.off('error', onCheckedOutError)
            client.release()
            released = true
          } else {
            try {
              await client.query('COMMIT')
            } catch (error) {
              // Sent, and no answer: committed or not, the server alone knows (the caller says so).
              if (!isConnectionLost(error)) throw error
              connection.broken = true
              throw new CommitOutcomeUnknownError(error)
            }
          }
        }
        return result
      } catch (error) {
        if (
          !connection.answered &&
          wasIdle &&
          attempt <= maxConnections &&
          isConnectionLost(error) &&
          !(error instanceof RoundTripTimeout)
        ) {
          connection.broken = true
          continue
        }
        // Its round trip got what the wait in the queue left of the deadline, and ran out: the
        // database answers, and this instance has more requests than connections (overload).
        if (error instanceof RoundTripTimeout && capped && queuedMs > 0)
          throw new PoolExhaustedError(maxConnections, queuedMs, pool.waitingCount)
        if (connection.owed === undefined) {
          try {
            await client.query('ROLLBACK')
          } catch {
            connection.broken = true
          }
        }
        if (
          attemptPrepare === 'pooler' &&
          mode.request &&
          mode.readOnly &&
          !recheck &&
          isPreparedStatementMissing(error)
        ) {
          recheck = true
          continue
        }
        // A statement another message on the shared connection was to PREPARE, and that message
        // failed first: not a pooler's doing. Run again, on another connection.
        if (connection.reliedOnAnother && isPreparedStatementMissing(error) && attempt <= maxConnections) {
          connection.broken = true
          continue
        }
        // Judged by the form this attempt ran in: a request begun before another one switched the
        // process is run again too.
        if (attemptPrepare === 'on' && mode.request && mode.readOnly && isPoolerSymptom(error)) {
          connection.broken = true
          if (prepare === 'on') {
            prepare = 'pooler'
            options.onPoolerDetected?.((error as Error).message.split('\n')[0] ?? '')
          }
          continue
        }
        if (mode.request && mode.readOnly && isConnectionLost(error) && Date.now() + 100 < deadline) {
          connection.broken = true
          await sleep(100)
          continue
        }
        throw error
      } finally {
        if (!released) {
          // A connection that could not even roll back is not given to the next request.
          client.off('error', onCheckedOutError)
          if (lease) sharing?.release(lease, connection.broken)
          else client.release(connection.broken)
        }
      }
    }
  }
  return { pool, transaction }
}

/**
 * The database (or its pooler) cannot serve just now, for every instance alike: a refused or lost
 * connection, a server starting, out of connections, or out of disk (isDiskFull: each new session
 * refused until there is room again, which needs no restart of ours).
 */
export function isStoreUnreachable(error: unknown): boolean {
  const code = (error as { code?: unknown }).code
  return (
    // A COMMIT whose connection was lost: the same outage, for readiness and for a request.
    error instanceof CommitOutcomeUnknownError ||
    isConnectRefused(error) ||
    isConnectionLost(error) ||
    code === '57P03' ||
    code === '53300' ||
    isDiskFull(error)
  )
}

export function isConnectRefused(error: unknown): boolean {
  const code = (error as { code?: unknown }).code
  return (
    code === 'ECONNREFUSED' ||
    code === 'ENOTFOUND' ||
    /timeout exceeded when trying to connect/.test((error as Error).message ?? '')
  )
}
