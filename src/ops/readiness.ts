import { PoolExhaustedError, StoreBusyError } from '../store/busy.js'
import { isStoreUnreachable } from '../store/postgres/postgres.js'
import { assertServing } from '../store/schema/serving.js'
import type { ReadOptions, Sql, Store } from '../store/types.js'

/**
 * How often the background check asks the store whether this release can serve it (the schema,
 * the reader's privileges), and whether it answers at all. A probe never waits for it: it reads
 * what the last check and the last requests found.
 */
export const CHECK_EVERY_MS = 1_000
/**
 * How long the background check waits for the store before it counts the store as unreachable.
 * A check that takes longer meets a store that is down or hung: every instance's at once.
 */
export const CHECK_TIMEOUT_MS = 2_000

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
export function isOutage(error: unknown): boolean {
  return error instanceof CheckTimeout || error instanceof StoreBusyError || isStoreUnreachable(error)
}

/** The first line of an error's message: for operators on the loopback ops port, never a stack. */
function reasonOf(error: unknown): string {
  return (error as Error)?.message?.split('\n')[0] || 'not ready'
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
 *
 * `report()` answers at once, from what the instance already knows: the last background check
 * (`start()`: every CHECK_EVERY_MS) and the outcome of the last requests (`succeeded`, `failed`).
 * A load balancer's or an orchestrator's check time-out, whatever it is, never meets a wait on the store.
 */
export class Readiness {
  draining = false
  /** When `/readyz` was last asked (ops-app.ts), by a balancer or an orchestrator: undefined, never. */
  lastAskedAt: number | undefined
  /** Set by the last check: what keeps this instance, and only it, from serving (schema, privileges). */
  #fault: string | undefined
  #unreachableSince: number | undefined
  #unreachableReason = ''
  #checking: Promise<void> | undefined
  #timer: NodeJS.Timeout | undefined

  constructor(
    private readonly check: () => Promise<void>,
    private readonly outageGraceMs: number,
    private readonly now: () => number = Date.now,
  ) {}

  /** What the instance knows now; never waits on the store. */
  report(): ReadinessReport {
    if (this.draining) return { statusCode: 503, body: { status: 'draining' } }
    if (this.#fault !== undefined)
      return { statusCode: 503, body: { status: 'not ready', reason: this.#fault } }
    if (this.#unreachableSince === undefined)
      return { statusCode: 200, body: { status: 'ready', store: 'ok' } }
    const elapsed = this.now() - this.#unreachableSince
    const seconds = Math.round(elapsed / 100) / 10
    const reason = this.#unreachableReason
    if (elapsed < this.outageGraceMs)
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

  /** The store answered (a request, a check). */
  succeeded(): void {
    this.#unreachableSince = undefined
  }

  /** A request or a check failed: an outage of the store starts (or goes on); any other failure of a request is its own. */
  failed(error: unknown): void {
    if (!isOutage(error)) return
    this.#unreachableSince ??= this.now()
    this.#unreachableReason = reasonOf(error)
  }

  /** Checks the store now (one check at a time) and answers what it then knows. */
  async refresh(): Promise<ReadinessReport> {
    this.#checking ??= this.#runCheck().finally(() => {
      this.#checking = undefined
    })
    await this.#checking
    return this.report()
  }

  /** Checks the store every CHECK_EVERY_MS, in the background, until `stop()`. */
  start(everyMs = CHECK_EVERY_MS): void {
    if (this.#timer) return
    this.#timer = setInterval(() => void this.refresh(), everyMs)
    this.#timer.unref()
    void this.refresh()
  }

  stop(): void {
    clearInterval(this.#timer)
    this.#timer = undefined
  }

  async #runCheck(): Promise<void> {
    try {
      await withTimeout(this.check(), CHECK_TIMEOUT_MS)
      this.#fault = undefined
      this.succeeded()
    } catch (error) {
      // The check's connection still held by a check that outran its time-out: nothing new.
      if (error instanceof PoolExhaustedError) return
      if (isOutage(error)) {
        this.failed(error)
      } else {
        this.#fault = reasonOf(error)
      }
    }
  }
}

/**
 * The server's readiness: a store that answers, and that this release can serve (the schema, the
 * reader's privileges), checked on the store's probe connection, never queued behind requests.
 */
export function storeReadiness(store: Store, outageGraceMs: number): Readiness {
  const probe = store.probe ?? (<T>(work: (sql: Sql) => Promise<T>) => store.admin(work))
  return new Readiness(() => probe(assertServing), outageGraceMs)
}

/**
 * The store with every request's outcome told to `readiness`: a request that reached the store
 * says it answers, sooner than the next check; one that could not says it is unreachable.
 */
export function observedStore(store: Store, readiness: Readiness): Store {
  async function read<T>(work: (sql: Sql) => Promise<T>, options?: ReadOptions): Promise<T> {
    try {
      const result = await store.read(work, options)
      readiness.succeeded()
      return result
    } catch (error) {
      readiness.failed(error)
      throw error
    }
  }
  return { ...store, read }
}
