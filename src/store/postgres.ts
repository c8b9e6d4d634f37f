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

export function createPostgresStore(options: PostgresStoreOptions): Store {
  const pool = new pg.Pool({
    connectionString: options.connectionString,
    max: options.maxConnections ?? 10,
    connectionTimeoutMillis: 5_000,
    idleTimeoutMillis: 30_000,
  })
  // Without a listener an idle connection's error would crash the process.
  pool.on('error', (error) => options.onIdleError?.(error))
  const timeout = options.statementTimeoutMs ?? 5_000

  async function transaction<T>(preamble: string, work: (sql: AdminSql) => Promise<T>): Promise<T> {
    const client = await pool.connect()
    let broken = false
    // A backend that dies while the connection is checked out emits 'error' on the client, which the
    // pool listens for only while it is idle: unheard, it would crash the process. The query in flight
    // rejects with the same error, so here the connection is only marked as not to be reused.
    const onCheckedOutError = () => {
      broken = true
    }
    client.on('error', onCheckedOutError)
    try {
      await client.query(preamble ? `BEGIN; ${preamble}` : 'BEGIN')
      const result = await work(sqlOf(client))
      await client.query('COMMIT')
      return result
    } catch (error) {
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

  return {
    kind: 'postgres',
    read: (work) => transaction(readerPreamble(true, timeout), work),
    asReader: (work) => transaction(readerPreamble(false, timeout), work),
    admin: (work) => transaction('', work),
    close: () => pool.end(),
  }
}
