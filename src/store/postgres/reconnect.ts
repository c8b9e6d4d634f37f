import { setTimeout as sleep } from 'node:timers/promises'
import type pg from 'pg'

/**
 * How often the store is tried while it refuses connections: at most this long after the store is
 * back, every request waiting on it goes on.
 */
export const RECONNECT_EVERY_MS = 100

/**
 * The wait of every request whose connection the store refused (a pooler or a server restarting),
 * shared: one connection attempt at a time tries the store, backing off from 25 ms to
 * RECONNECT_EVERY_MS, and the moment it gets through, every request waiting goes on together.
 *
 * Each request trying on a backoff of its own answered up to the backoff's cap after the store's
 * return, and a crowd of them knocked on a restarting pooler or server many times each.
 */
export function reconnector(pool: pg.Pool, isRefusal: (error: unknown) => boolean) {
  let back: Promise<void> | undefined
  let waiting = 0

  async function tryUntilBack(): Promise<void> {
    for (let delay = 25; waiting > 0; delay = Math.min(delay * 2, RECONNECT_EVERY_MS)) {
      await sleep(delay)
      try {
        // Released idle: the first request to go on takes it.
        ;(await pool.connect()).release()
        return
      } catch (error) {
        // Another failure is for the requests to meet on their own next try.
        if (!isRefusal(error)) return
      }
    }
  }

  /** Resolves once the store takes a connection again, or at `deadline` (ms since the epoch). */
  return async function untilBack(deadline: number): Promise<void> {
    waiting++
    back ??= tryUntilBack().finally(() => {
      back = undefined
    })
    const timeUp = new AbortController()
    try {
      await Promise.race([
        back,
        sleep(Math.max(0, deadline - Date.now()), undefined, { signal: timeUp.signal }),
      ])
    } finally {
      timeUp.abort()
      waiting--
    }
  }
}
