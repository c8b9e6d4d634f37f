import { StoreBusyError } from '../store/busy.js'
import { isStoreUnreachable } from '../store/postgres.js'
import { assertCanServe } from '../store/serving.js'
import type { Store } from '../store/types.js'

/**
 * How long a readiness probe waits for the store before it counts the store as unreachable:
 * well within a load balancer's own check time-out (2 s in docs/topology/haproxy.conf), so that
 * the balancer hears the answer (200 through a short outage) rather than a time-out of its own.
 */
const CHECK_TIMEOUT_MS = 1_000

class CheckTimeout extends Error {
  constructor() {
    super('the store did not answer in time')
  }
}

function withTimeout(work: Promise<void>, ms: number): Promise<void> {
  let timer: NodeJS.Timeout | undefined
  const timeout = new Promise<never>((_, reject) => {
    timer = setTimeout(() => reject(new CheckTimeout()), ms)
  })
  return Promise.race([work, timeout]).finally(() => clearTimeout(timer))
}

/** A store that cannot be reached just now (shared by every instance), not one this instance cannot use. */
function isOutage(error: unknown): boolean {
  return error instanceof CheckTimeout || error instanceof StoreBusyError || isStoreUnreachable(error)
}

export interface ReadinessReport {
  readonly statusCode: 200 | 503
  readonly body: Readonly<Record<string, unknown>>
}

/**
 * "This instance can serve" (README, Operations port). 503 when it cannot and another could:
 * draining, a schema it cannot serve, a privilege the reader lacks, or a store it has not reached
 * for longer than `outageGraceMs`. A shorter outage of the store is every instance's at once (the
 * pooler or the primary restarting): all of them turning 503 would only make the load balancer
 * answer every request itself, so readiness stays 200 while requests wait the outage out, and
 * the body says what the store is doing.
 */
export class Readiness {
  draining = false
  #unreachableSince: number | undefined

  constructor(
    private readonly check: () => Promise<void>,
    private readonly outageGraceMs: number,
    private readonly now: () => number = Date.now,
  ) {}

  async report(): Promise<ReadinessReport> {
    if (this.draining) return { statusCode: 503, body: { status: 'draining' } }
    try {
      await withTimeout(this.check(), CHECK_TIMEOUT_MS)
      this.#unreachableSince = undefined
      return { statusCode: 200, body: { status: 'ready', store: 'ok' } }
    } catch (error) {
      // The reason is for operators on the loopback ops port; still one line, never a stack.
      const reason = (error as Error).message?.split('\n')[0] || 'not ready'
      if (!isOutage(error)) {
        this.#unreachableSince = undefined
        return { statusCode: 503, body: { status: 'not ready', reason } }
      }
      const now = this.now()
      this.#unreachableSince ??= now
      const seconds = Math.round((now - this.#unreachableSince) / 100) / 10
      if (now - this.#unreachableSince < this.outageGraceMs)
        return { statusCode: 200, body: { status: 'ready', store: 'unreachable', seconds, reason } }
      return {
        statusCode: 503,
        body: {
          status: 'not ready',
          store: 'unreachable',
          seconds,
          reason: `the store has not answered for ${seconds} s: ${reason}`,
        },
      }
    }
  }
}

/** The server's readiness: a store that answers the request path's way, and that this release can serve. */
export function storeReadiness(store: Store, outageGraceMs: number): Readiness {
  return new Readiness(async () => {
    await store.read((sql) => sql.query('SELECT 1'))
    await assertCanServe(store)
  }, outageGraceMs)
}
