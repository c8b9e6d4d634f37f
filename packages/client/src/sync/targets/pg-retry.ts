/**
 * Warehouse blips. A run into PostgreSQL that loses its connection for a moment (a restart, a
 * fail-over, a pooler that drops its sessions) goes on from its last checkpoint, as a rerun
 * would, after the same bounded backoff as the API's requests: full jitter up to 5 s, for up to
 * `maxElapsedMs` (default 5 minutes) and `maxAttempts`. Each retry is told as a `retry` event in
 * PostgreSQL's own words (url `postgresql:`: the connection string is never given). Only failures
 * that pass by themselves are retried; anything else fails the run at once, as before.
 */
import type { ClientEvent } from '../../transport.js'
import { SyncTargetError } from '../engine/errors.js'
import { SYNC_RETRY, type SyncOptions, type SyncProgress, type SyncSummary } from '../engine/options.js'

/** The connection refused, reset, cut or unreachable for a moment. */
const NETWORK = new Set([
  'ECONNREFUSED',
  'ECONNRESET',
  'ETIMEDOUT',
  'EPIPE',
  'EHOSTUNREACH',
  'ENETUNREACH',
  'EAI_AGAIN',
])
/**
 * PostgreSQL's passing conditions: connection exceptions (08), a shutdown or start-up under way
 * (57P01-57P03), no free connection (53300), a serialization failure or a deadlock (40001, 40P01).
 */
const PASSING_SQLSTATE = /^(08...|57P0[123]|53300|40001|40P01)$/
/** The driver's own connection failures, which carry no code ("Connection terminated unexpectedly"). */
const DRIVER_CONNECTION = /connection/i

/** Whether a run's failure is a warehouse blip, which a retry of the run can ride out. */
export function isWarehouseBlip(error: unknown): error is SyncTargetError {
  if (!(error instanceof SyncTargetError)) return false
  const code = error.code ?? ''
  if (NETWORK.has(code) || PASSING_SQLSTATE.test(code)) return true
  return code === 'target_failed' && DRIVER_CONNECTION.test(error.message)
}

/** PostgreSQL's words, with its code when they do not name it already. */
function wordsOf(error: SyncTargetError): string {
  const code = error.code ?? 'target_failed'
  return code === 'target_failed' || error.message.includes(code)
    ? error.message
    : `${error.message} (${code})`
}

const sleep = (ms: number, signal: AbortSignal | undefined) =>
  new Promise<void>((resolve, reject) => {
    if (signal?.aborted) return reject(signal.reason)
    const onAbort = () => {
      clearTimeout(timer)
      reject(signal?.reason)
    }
    const timer = setTimeout(() => {
      signal?.removeEventListener('abort', onAbort)
      resolve()
    }, ms)
    signal?.addEventListener('abort', onAbort, { once: true })
  })

/**
 * Runs `run`, and runs it again after a warehouse blip: it resumes from the state its last
 * checkpoint saved. The attempts and the time are counted from the first failure of a streak; a
 * run that read pages before it failed starts a new one. The summary counts these retries too.
 */
export async function withWarehouseRetries<Options extends Omit<SyncOptions, 'out'>>(
  options: Options,
  run: (options: Options) => Promise<SyncSummary>,
  random: () => number = Math.random,
): Promise<SyncSummary> {
  const maxAttempts = options.maxAttempts ?? SYNC_RETRY.maxAttempts
  const maxElapsedMs = options.maxElapsedMs ?? SYNC_RETRY.maxElapsedMs
  let attempt = 0
  let streakStarted = 0
  let retries = 0
  for (;;) {
    let progressed = false
    const onProgress = (progress: SyncProgress) => {
      progressed = true
      options.onProgress?.(progress)
    }
    try {
      const summary = await run({ ...options, onProgress })
      return { ...summary, retries: summary.retries + retries }
    } catch (error) {
      if (!isWarehouseBlip(error) || options.signal?.aborted) throw error
      if (attempt === 0 || progressed) {
        attempt = 0
        streakStarted = Date.now()
      }
      attempt++
      if (attempt >= maxAttempts) throw error
      const ceiling = Math.min(SYNC_RETRY.maxDelayMs, SYNC_RETRY.baseDelayMs * 2 ** (attempt - 1))
      const delayMs = Math.round(random() * ceiling)
      if (Date.now() - streakStarted + delayMs > maxElapsedMs) throw error
      const event: ClientEvent = {
        type: 'retry',
        url: 'postgresql:',
        attempt,
        delayMs,
        reason: `PostgreSQL: ${wordsOf(error)}`,
        requestId: undefined,
      }
      options.onClientEvent?.(event)
      retries++
      await sleep(delayMs, options.signal)
    }
  }
}
