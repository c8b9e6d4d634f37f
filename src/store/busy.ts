/**
 * The store cannot serve a request just now, through no fault of the request: a maintenance lock,
 * a restart, no free connection. Rendered as 503 `service_unavailable` with `Retry-After`.
 *
 * The message goes to the client as it is: write it for the client, never from driver text.
 */
export class StoreBusyError extends Error {
  constructor(
    message: string,
    readonly retryAfterSeconds = 1,
  ) {
    super(message)
    this.name = 'StoreBusyError'
  }
}

/**
 * A request gave up waiting for a free connection of its pool: every connection was open and in
 * use. The database was answering (its connections were busy with other requests), so this is
 * overload, not an outage: rendered as 503 `overloaded`, counted as `pool_exhausted`, and no sign
 * for readiness that the store is unreachable.
 */
export class PoolExhaustedError extends Error {
  constructor(
    readonly poolSize: number,
    readonly waitedMs: number,
    readonly waiting: number,
  ) {
    super(
      `no free database connection within ${(waitedMs / 1000).toFixed(1)} s: all ${poolSize} of the pool in use, ${waiting} more requests waiting`,
    )
    this.name = 'PoolExhaustedError'
  }
}

/**
 * The connection was lost while its COMMIT was on the way (a failover, a pooler restarting): the
 * server may have committed the transaction or not, and only reading it back can tell. `cause`
 * is what the driver said.
 */
export class CommitOutcomeUnknownError extends Error {
  constructor(override readonly cause: unknown) {
    super(`the connection was lost while committing: ${(cause as Error)?.message?.split('\n')[0] ?? cause}`)
    this.name = 'CommitOutcomeUnknownError'
  }
}
