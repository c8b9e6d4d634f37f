import type { pino } from 'pino'

/** The signals that stop a server: a closed terminal or ssh connection (SIGHUP), a supervisor, Ctrl-C. */
const STOP_SIGNALS = ['SIGHUP', 'SIGINT', 'SIGTERM'] as const

export interface SetUpGuard {
  /** What the set-up does now, as the cancel line will name it; `announce`: also said in an info line. */
  phase(what: string, announce?: boolean): void
  /** The set-up is over: the serving server's own handlers (close-with-grace) take the signals from here. */
  done(): void
}

/**
 * Until the server serves, a stop signal cancels its set-up (creating DATA_DIR, migrating,
 * seeding the demo): one warning line says what was cancelled, and the process exits 0, as a
 * server stopped by the same signal while serving does. Nothing was served and nothing half-done
 * is kept: a DATA_DIR being created has no PG_VERSION yet (it is created again), a seed is one
 * transaction (never committed), and DATA_DIR's lock is released on exit. So the next start begins
 * the set-up again. The child that creates DATA_DIR ends with this process (embedded-create.ts).
 */
export function guardSetUp(log: pino.Logger): SetUpGuard {
  let current = 'starting'
  const onSignal = (signal: NodeJS.Signals) => {
    log.warn(
      { signal, cancelled: current },
      `interrupted by ${signal} during set-up: ${current} was cancelled; nothing was served, and the next start begins it again`,
    )
    log.flush()
    process.exit(0)
  }
  for (const signal of STOP_SIGNALS) process.on(signal, onSignal)
  return {
    phase(what, announce = false) {
      current = what
      if (announce) log.info(`set-up: ${what}`)
    },
    done() {
      for (const signal of STOP_SIGNALS) process.off(signal, onSignal)
    },
  }
}
