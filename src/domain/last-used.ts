import type { FastifyBaseLogger } from 'fastify'
import { touchKeys } from '../queries/api-keys.js'
import type { Store } from '../store/types.js'

export interface LastUsedOptions {
  /** A key's last use is recorded at most once per this many milliseconds. */
  readonly resolutionMs: number
  /** Pending uses are written in one batch at this interval. */
  readonly flushEveryMs: number
  /** Told how far behind the writes are, and of each failed batch (the metrics). */
  readonly observer?: LastUsedObserver
}

export interface LastUsedObserver {
  /** `since`: when the oldest use still to be written happened; undefined when none waits. */
  lastUsedPending(since: number | undefined): void
  lastUsedFlushFailed(): void
}

/**
 * Records when keys were last used without a write per request: a key whose
 * recorded use is recent enough is skipped, the others are batched per
 * organization and written in the background.
 */
export class LastUsedTracker {
  private readonly pending = new Map<string, Set<string>>()
  private readonly timer: NodeJS.Timeout
  private oldestPending: number | undefined

  constructor(
    private readonly store: Store,
    private readonly log: FastifyBaseLogger,
    private readonly options: LastUsedOptions,
  ) {
    this.timer = setInterval(() => void this.flush(), options.flushEveryMs)
    this.timer.unref()
  }

  seen(orgId: string, keyId: string, lastUsedAt: Date | string | null): void {
    const last = lastUsedAt === null ? 0 : new Date(lastUsedAt).getTime()
    if (Date.now() - last < this.options.resolutionMs) return
    const keys = this.pending.get(orgId) ?? new Set<string>()
    keys.add(keyId)
    this.pending.set(orgId, keys)
    if (this.oldestPending === undefined) {
      this.oldestPending = Date.now()
      this.options.observer?.lastUsedPending(this.oldestPending)
    }
  }

  async flush(): Promise<void> {
    const batches = [...this.pending]
    this.pending.clear()
    for (const [orgId, keys] of batches) {
      try {
        await this.store.asReader((sql) => touchKeys(sql, orgId, [...keys]))
      } catch (error) {
        this.log.warn({ err: error }, 'could not record API key use')
        this.options.observer?.lastUsedFlushFailed()
      }
    }
    if (batches.length > 0 && this.pending.size === 0) {
      this.oldestPending = undefined
      this.options.observer?.lastUsedPending(undefined)
    }
  }

  async close(): Promise<void> {
    clearInterval(this.timer)
    await this.flush()
  }
}
