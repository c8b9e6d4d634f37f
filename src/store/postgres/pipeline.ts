import type { Socket } from 'node:net'
import type pg from 'pg'

/**
 * Read-only requests that share a pooled connection: those that come in the same turn of the
 * event loop send their messages on one connection, up to `depth` of them, written to its socket
 * together (corked until the turn ends) and answered in order without waiting for each other
 * (node-postgres's pipeline mode). One write and one wake-up of the backend carry several
 * requests: PostgreSQL reads them one after the other without going to sleep in between. A
 * request that comes while such a connection still waits for the pool (every connection busy)
 * joins it too: it would have waited as long.
 *
 * Only a read that is one message shares (`ReadOptions.oneMessage`, a list's read): each message
 * on a shared connection is a transaction of its own, its settings with it, so a message never
 * runs inside another's transaction (connection.ts, `shared`). A request never joins a connection
 * written to in an earlier turn: it would wait behind work sent before it came, and a connection
 * held by a slow request stays its own.
 */

/** How many requests may share a connection unless DATABASE_PIPELINE_DEPTH says otherwise. */
export const PIPELINE_DEPTH = 4

/** A pooled connection and the requests on it. */
export interface Shared {
  readonly client: Promise<pg.PoolClient>
  users: number
  /** Not to be given back to the pool for reuse: one of its requests found it broken. */
  broken: boolean
}

export interface Lease {
  readonly shared: Shared
  readonly client: pg.PoolClient
  /** It came on a connection another request of the same turn had taken from the pool. */
  readonly joined: boolean
}

type Pipelined = pg.PoolClient & {
  pipeline: boolean
  connection: { stream: Socket }
}

export class ConnectionSharing {
  /** The connection taken in this turn of the event loop, open to the turn's other requests. */
  private forming: Shared | undefined

  constructor(private readonly depth: number) {}

  /** A connection for one request: the turn's, while it has room, or a new one from `connect`. */
  async acquire(connect: () => Promise<pg.PoolClient>): Promise<Lease> {
    const open = this.forming
    if (open && open.users < this.depth && !open.broken) {
      open.users++
      try {
        return { shared: open, client: await open.client, joined: true }
      } catch (error) {
        open.users--
        throw error
      }
    }
    // Open to others until the turn in which the connection came ends: requests that come while
    // it waits for a free connection of the pool wait with it, and go together.
    const shared: Shared = {
      client: connect().then((client) => {
        setImmediate(() => {
          if (this.forming === shared) this.forming = undefined
        })
        return pipelined(client)
      }),
      users: 1,
      broken: false,
    }
    this.forming = shared
    try {
      return { shared, client: await shared.client, joined: false }
    } catch (error) {
      shared.users--
      if (this.forming === shared) this.forming = undefined
      throw error
    }
  }

  /** One request is done with the connection; the last one gives it back to the pool. */
  release(lease: Lease, broken: boolean): void {
    const { shared, client } = lease
    if (broken) shared.broken = true
    if (--shared.users > 0) return
    if (this.forming === shared) this.forming = undefined
    ;(client as Pipelined).pipeline = false
    client.release(shared.broken)
  }
}

/**
 * The connection in pipeline mode, its socket corked until the end of this turn: the messages of
 * the requests that share it go out in one write.
 */
function pipelined(client: pg.PoolClient): pg.PoolClient {
  const shared = client as Pipelined
  shared.pipeline = true
  const stream = shared.connection.stream
  stream.cork()
  setImmediate(() => stream.uncork())
  return client
}
