import { pipeline } from 'node:stream/promises'
import pg from 'pg'
import { from as copyFrom } from 'pg-copy-streams'
import { type AdminSql, copyStatement, readerPreamble, type Store } from './types.js'

export interface PostgresStoreOptions {
  readonly connectionString: string
  /** A streaming replica for the request path's reads (DATABASE_READ_URL); writes stay on the primary. */
  readonly readConnectionString?: string
  /** Reads fall back to the primary while the replica is further behind than this. */
  readonly maxReplicaLagMs?: number
  readonly maxConnections?: number
  readonly statementTimeoutMs?: number
  /** Called for errors of idle pooled connections (a restarted server, a terminated backend). */
  readonly onIdleError?: (error: Error) => void
  /** Told when reads move off the replica or back to it, and of each read sent to the primary instead. */
  readonly replicaEvents?: ReplicaEvents
}

export type ReplicaState = 'ok' | 'down' | 'behind'

export interface ReplicaEvents {
  stateChanged(state: ReplicaState, detail: string): void
  fellBack(reason: Exclude<ReplicaState, 'ok'>): void
}

function sqlOf(client: pg.PoolClient): AdminSql {
  return {
    async query<Row extends object>(text: string, params: readonly unknown[] = []) {
      const result = await client.query<Row>(text, params as unknown[])
      return result.rows
    },
    async exec(text: string) {
      await client.query(text)
    },
    async copyIn(table, columns, text) {
      await pipeline([text], client.query(copyFrom(copyStatement(table, columns, 'STDIN'))))
    },
  }
}

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

type Transaction = <T>(preamble: string, work: (sql: AdminSql) => Promise<T>) => Promise<T>

interface Database {
  readonly pool: pg.Pool
  readonly transaction: Transaction
}

function openDatabase(connectionString: string, options: PostgresStoreOptions): Database {
  const maxConnections = options.maxConnections ?? 10
  const pool = new pg.Pool({
    connectionString,
    max: maxConnections,
    connectionTimeoutMillis: 5_000,
    idleTimeoutMillis: 30_000,
  })
  // Without a listener an idle connection's error would crash the process.
  pool.on('error', (error) => options.onIdleError?.(error))
  /** Connections that have begun a transaction before: the ones that have sat idle in the pool. */
  const reused = new WeakSet<pg.PoolClient>()

  async function transaction<T>(preamble: string, work: (sql: AdminSql) => Promise<T>): Promise<T> {
    const begin = preamble ? `BEGIN; ${preamble}` : 'BEGIN'
    // A backend that dies while its connection is idle (pg_terminate_backend, a restarted server)
    // is noticed by the pool only once its error has been read off the socket; until then the pool
    // still hands the connection out, and the BEGIN is the statement that fails. Nothing of `work`
    // has run then, and the BEGIN and preamble only set up this transaction, so the connection is
    // discarded and the transaction starts again on another one. All the idle connections may have
    // died at once: after `maxConnections` discards the pool has none left and opens a new one. A
    // new connection that fails is not retried (the server is refusing sessions), and nothing is
    // retried once `work` has been called.
    for (let attempt = 1; ; attempt++) {
      const client = await pool.connect()
      const wasIdle = reused.has(client)
      let broken = false
      let begun = false
      // A backend that dies while the connection is checked out emits 'error' on the client, which the
      // pool listens for only while it is idle: unheard, it would crash the process. The query in flight
      // rejects with the same error, so here the connection is only marked as not to be reused.
      const onCheckedOutError = () => {
        broken = true
      }
      client.on('error', onCheckedOutError)
      try {
        await client.query(begin)
        begun = true
        reused.add(client)
        const result = await work(sqlOf(client))
        await client.query('COMMIT')
        return result
      } catch (error) {
        if (!begun && wasIdle && attempt <= maxConnections && isConnectionLost(error)) {
          broken = true
          continue
        }
        try {
          await client.query('ROLLBACK')
        } catch {
          broken = true
        }
        throw error
      } finally {
        // A connection that could not even roll back is not given to the next request.
        client.off('error', onCheckedOutError)
        client.release(broken)
      }
    }
  }
  return { pool, transaction }
}

const stats = (database: string, pool: pg.Pool) => ({
  database,
  total: pool.totalCount,
  idle: pool.idleCount,
  waiting: pool.waitingCount,
})

export function createPostgresStore(options: PostgresStoreOptions): Store {
  const timeout = options.statementTimeoutMs ?? 5_000
  const primary = openDatabase(options.connectionString, options)
  const replica = options.readConnectionString
    ? openDatabase(options.readConnectionString, options)
    : undefined
  const monitor = replica
    ? new ReplicaMonitor(primary, replica, options.maxReplicaLagMs ?? 5_000, options.replicaEvents)
    : undefined
  const readPreamble = readerPreamble(true, timeout)

  /**
   * The request path on the replica while it is up and close enough behind, else on the primary.
   * A read that cannot even begin on the replica (refused, gone) moves to the primary at once:
   * nothing of it has run, and the replica is marked down until the monitor sees it back.
   */
  async function read<T>(work: (sql: AdminSql) => Promise<T>): Promise<T> {
    if (!replica || !monitor) return primary.transaction(readPreamble, work)
    const state = monitor.state
    if (state !== 'ok') {
      options.replicaEvents?.fellBack(state)
      return primary.transaction(readPreamble, work)
    }
    let started = false
    try {
      return await replica.transaction(readPreamble, (sql) => {
        started = true
        return work(sql)
      })
    } catch (error) {
      if (started || !(isConnectionLost(error) || isConnectRefused(error))) throw error
      monitor.markDown(error)
      options.replicaEvents?.fellBack('down')
      return primary.transaction(readPreamble, work)
    }
  }

  return {
    kind: 'postgres',
    concurrentReads: true,
    read,
    // Last-used writes, the CLI and migrations stay on the primary.
    asReader: (work) => primary.transaction(readerPreamble(false, timeout), work),
    admin: (work) => primary.transaction('', work),
    pools: () => [stats('primary', primary.pool), ...(replica ? [stats('replica', replica.pool)] : [])],
    ...(monitor ? { replicaLagSeconds: () => monitor.lagSeconds } : {}),
    async close() {
      monitor?.stop()
      await Promise.all([primary.pool.end(), replica?.pool.end()])
    },
  }
}

function isConnectRefused(error: unknown): boolean {
  const code = (error as { code?: unknown }).code
  return (
    code === 'ECONNREFUSED' ||
    code === 'ENOTFOUND' ||
    /timeout exceeded when trying to connect/.test((error as Error).message ?? '')
  )
}

/** A WAL position ('16/B374D848') as a number of bytes; exact up to 2^53 (8 PiB of WAL). */
function lsnBytes(lsn: string): number {
  const [high = '0', low = '0'] = lsn.split('/')
  return Number.parseInt(high, 16) * 2 ** 32 + Number.parseInt(low, 16)
}

const MONITOR_EVERY_MS = 1_000

/**
 * Watches how far the replica is behind: every second it notes the primary's WAL position and the
 * replica's replay position. The lag is the age of the oldest primary position the replica has
 * not replayed yet, so it is exact to the second whatever the replica's clock or the write rate.
 */
class ReplicaMonitor {
  state: ReplicaState = 'ok'
  lagSeconds: number | undefined = 0
  readonly #samples: { at: number; lsn: number }[] = []
  readonly #timer: NodeJS.Timeout
  #checking = false

  constructor(
    private readonly primary: Database,
    private readonly replica: Database,
    private readonly maxLagMs: number,
    private readonly events: ReplicaEvents | undefined,
  ) {
    this.#timer = setInterval(() => void this.check(), MONITOR_EVERY_MS)
    this.#timer.unref()
    void this.check()
  }

  markDown(error: unknown): void {
    this.#set('down', (error as Error).message?.split('\n')[0] ?? 'unreachable')
  }

  async check(): Promise<void> {
    if (this.#checking) return
    this.#checking = true
    try {
      const [current] = await this.primary.transaction('', (sql) =>
        sql.query<{ lsn: string }>('SELECT pg_current_wal_lsn()::text AS lsn'),
      )
      if (current) this.#samples.push({ at: Date.now(), lsn: lsnBytes(current.lsn) })
    } catch {
      // The primary's own trouble is not the replica's: keep the last state.
      this.#checking = false
      return
    }
    try {
      const [row] = await this.replica.transaction('SET LOCAL statement_timeout = 2000', (sql) =>
        sql.query<{ replay: string | null }>('SELECT pg_last_wal_replay_lsn()::text AS replay'),
      )
      if (!row?.replay) throw new Error('not a streaming replica (no replay position)')
      const replayed = lsnBytes(row.replay)
      while (this.#samples.length > 1 && (this.#samples[0]?.lsn ?? 0) <= replayed) this.#samples.shift()
      const oldest = this.#samples[0]
      const lagMs = oldest && oldest.lsn > replayed ? Date.now() - oldest.at : 0
      this.lagSeconds = lagMs / 1000
      this.#set(lagMs > this.maxLagMs ? 'behind' : 'ok', `${this.lagSeconds.toFixed(1)} s behind`)
    } catch (error) {
      this.lagSeconds = undefined
      this.markDown(error)
    } finally {
      // Bounded: one sample a second, dropped once replayed.
      if (this.#samples.length > 3_600) this.#samples.splice(0, this.#samples.length - 3_600)
      this.#checking = false
    }
  }

  stop(): void {
    clearInterval(this.#timer)
  }

  #set(state: ReplicaState, detail: string): void {
    if (state === this.state) return
    this.state = state
    this.events?.stateChanged(state, detail)
  }
}
