import { setTimeout as sleep } from 'node:timers/promises'
import {
  AUTOVACUUM_DEFAULTS,
  COUNTERS,
  type MaintenanceRun,
  type MaintenanceStatement,
  maintenancePass,
  type TableCounters,
  type Thresholds,
} from './embedded-autovacuum.js'

/**
 * When the embedded store's own autovacuum looks at its tables: a minute after the last look
 * (autovacuum_naptime's default), ten seconds after a write transaction (a key created, a small
 * import forwarded to the server), and a few seconds after the store opens (what a previous
 * process left). A look is two short turns (the counters); a table found due is one more.
 */
export interface AutovacuumOptions {
  /** Between two looks at the tables' counters (default 60 s). */
  readonly everyMs?: number
  /** From a write transaction's commit to the next look, if that is sooner (default 10 s). */
  readonly afterWriteMs?: number
  /** From the store's opening to the first look (default 5 s). */
  readonly firstAfterMs?: number
  /**
   * How long a table's statement waits for a moment when no transaction is running or queued,
   * before it takes its turn anyway (default 5 s): under a steady load it still runs.
   */
  readonly idleWaitMs?: number
  readonly thresholds?: Partial<Thresholds>
  /** Told as a table's statement is queued: a request that comes now waits for it. */
  readonly onBegun?: (table: string, statement: MaintenanceStatement) => void
  /** Told of each statement a pass ran, with its time. */
  readonly onRun?: (run: MaintenanceRun) => void
  /** A pass that failed (the next look tries again). */
  readonly onError?: (error: unknown) => void
}

export interface AutovacuumStore {
  maintain(statement: string): Promise<void>
  counters(text: string): Promise<TableCounters[]>
  /** No transaction runs, and none is queued. */
  idle(): boolean
}

export interface Autovacuum {
  /** A write transaction committed: look again soon. */
  wrote(): void
  /** No more looks; settles once a pass under way has stopped. */
  stop(): Promise<void>
}

class Stopped extends Error {}

/** How often an idle moment is looked for while a table's statement waits for one. */
const IDLE_POLL_MS = 10

export function startAutovacuum(options: AutovacuumOptions, store: AutovacuumStore): Autovacuum {
  const everyMs = options.everyMs ?? 60_000
  const afterWriteMs = options.afterWriteMs ?? 10_000
  const idleWaitMs = options.idleWaitMs ?? 5_000
  const thresholds = { ...AUTOVACUUM_DEFAULTS, ...options.thresholds }
  let timer: NodeJS.Timeout | undefined
  let nextAt = Number.POSITIVE_INFINITY
  let running: Promise<void> | undefined
  let stopped = false
  /** A write committed while a pass ran: the next look comes after afterWriteMs, not everyMs. */
  let wroteMeanwhile = false

  const schedule = (ms: number) => {
    clearTimeout(timer)
    nextAt = Date.now() + ms
    // A look never keeps the process alive: the store's own work does.
    timer = setTimeout(() => void look(), ms).unref()
  }

  const waitForIdle = async () => {
    const until = Date.now() + idleWaitMs
    while (!stopped && !store.idle() && Date.now() < until) await sleep(IDLE_POLL_MS)
    if (stopped) throw new Stopped()
  }

  const look = async () => {
    nextAt = Number.POSITIVE_INFINITY
    wroteMeanwhile = false
    running = maintenancePass(
      {
        maintain: (statement) => store.maintain(statement),
        counters: () => store.counters(COUNTERS),
        beforeEach: waitForIdle,
        ...(options.onBegun ? { begun: options.onBegun } : {}),
      },
      thresholds,
    ).then(
      (runs) => {
        for (const run of runs) options.onRun?.(run)
      },
      (error: unknown) => {
        if (!stopped && !(error instanceof Stopped)) options.onError?.(error)
      },
    )
    await running
    running = undefined
    if (!stopped) schedule(wroteMeanwhile ? afterWriteMs : everyMs)
  }

  schedule(options.firstAfterMs ?? 5_000)
  return {
    wrote() {
      // Brought forward, never put off: a steady stream of writes still gets its looks.
      if (running) wroteMeanwhile = true
      else if (!stopped && Date.now() + afterWriteMs < nextAt) schedule(afterWriteMs)
    },
    async stop() {
      stopped = true
      clearTimeout(timer)
      await running
    },
  }
}
