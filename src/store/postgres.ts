import { pipeline } from 'node:stream/promises'
import pg from 'pg'
import { from as copyFrom } from 'pg-copy-streams'
import { type AdminSql, copyStatement, readerPreamble, type Store } from './types.js'

export interface PostgresStoreOptions {
  readonly connectionString: string
  readonly maxConnections?: number
  readonly statementTimeoutMs?: number
  /** Called for errors of idle pooled connections (a restarted server, a terminated backend). */
  readonly onIdleError?: (error: Error) => void
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

export function createPostgresStore(options: PostgresStoreOptions): Store {
  const maxConnections = options.maxConnections ?? 10
  const pool = new pg.Pool({
    connectionString: options.connectionString,
    max: maxConnections,
    connectionTimeoutMillis: 5_000,
    idleTimeoutMillis: 30_000,
  })
  // Without a listener an idle connection's error would crash the process.
  pool.on('error', (error) => options.onIdleError?.(error))
  const timeout = options.statementTimeoutMs ?? 5_000
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

  return {
    kind: 'postgres',
    concurrentReads: true,
    read: (work) => transaction(readerPreamble(true, timeout), work),
    asReader: (work) => transaction(readerPreamble(false, timeout), work),
    admin: (work) => transaction('', work),
    pools: () => [
      { database: 'primary', total: pool.totalCount, idle: pool.idleCount, waiting: pool.waitingCount },
    ],
    close: () => pool.end(),
  }
}
