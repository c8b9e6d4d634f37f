import { setTimeout as sleep } from 'node:timers/promises'
import type { Config } from '../config.js'
import { cancellable } from '../operator/cancellable.js'
import { OperatorError } from '../operator-error.js'
import { assertOperatorAccess, openStore } from '../store/open.js'
import { assertSchemaServable } from '../store/schema/migrate.js'
import type { Store } from '../store/types.js'
import type { CliContext, StoreOptions } from './context.js'
import { openInput } from './input.js'
import { isPassingStoreFault, serverWords } from './outcome.js'

/**
 * Ctrl-C (or SIGTERM) during a command cancels it: its transaction rolls back at the next
 * statement and the store is closed cleanly. A second Ctrl-C stops at once; PostgreSQL and
 * PGlite then roll back the unfinished transaction themselves.
 */
function interruptSignal(): AbortSignal {
  const controller = new AbortController()
  const onSignal = () => {
    if (controller.signal.aborted) process.exit(130)
    controller.abort(
      new OperatorError('interrupted: the command was cancelled and nothing of it was written'),
    )
  }
  process.on('SIGINT', onSignal)
  process.on('SIGTERM', onSignal)
  return controller.signal
}

/** A command run in this process: it opens the store itself, for as long as the command runs. */
export function localContext(config: Config, argv: readonly string[]): CliContext {
  const signal = interruptSignal()
  return {
    stdout: process.stdout,
    stderr: process.stderr,
    stdin: process.stdin,
    interactive: Boolean(process.stderr.isTTY),
    apiKeyBrand: config.apiKeyBrand,
    openInput,
    async withStore(work, options) {
      const once = <T>(work: (store: Store) => Promise<T>, deadlineMs: number) =>
        withStoreOnce(config, argv, signal, work, options, deadlineMs)
      if (!options?.idempotent || !config.databaseUrl) return once(work, config.requestDeadlineMs)
      return retried(config.requestDeadlineMs, signal, (deadlineMs) => once(work, deadlineMs))
    },
  }
}

/** The store opened for one run of `work`, and closed after it. */
async function withStoreOnce<T>(
  config: Config,
  argv: readonly string[],
  signal: AbortSignal,
  work: (store: Store) => Promise<T>,
  options: StoreOptions | undefined,
  requestDeadlineMs: number,
): Promise<T> {
  // Operator commands write: they run on the primary, never on a read replica.
  const store = await openStore(
    { ...config, databaseReadUrl: undefined, requestDeadlineMs },
    { command: `\`openbook ${argv[0] ?? ''}\``, shortLived: true },
  )
  try {
    if (!options?.migrating) {
      await assertOperatorAccess(store)
      await assertSchemaServable(store)
    }
    return await work(cancellable(store, signal))
  } finally {
    await store.close()
  }
}

/**
 * A command that writes nothing a second run would not, run again while the database is away (a
 * failover, a pooler or a server restarting: PgBouncer retries a failed server login after 15 s),
 * with a backoff from 250 ms to 2 s, for twice REQUEST_DEADLINE_MS in all (16 s by default); each
 * run waits for connections only as long as is left. Then it gives up in the server's words.
 */
async function retried<T>(
  requestDeadlineMs: number,
  signal: AbortSignal,
  run: (deadlineMs: number) => Promise<T>,
): Promise<T> {
  const started = Date.now()
  const giveUpAt = started + 2 * requestDeadlineMs
  for (let attempt = 1; ; attempt++) {
    try {
      return await run(Math.max(500, Math.min(requestDeadlineMs, giveUpAt - Date.now())))
    } catch (error) {
      if (!isPassingStoreFault(error) || signal.aborted) throw error
      const backoff = Math.min(250 * 2 ** (attempt - 1), 2_000)
      if (Date.now() + backoff >= giveUpAt) {
        const seconds = ((Date.now() - started) / 1000).toFixed(1)
        throw new OperatorError(
          `the database did not answer this command: ${serverWords(error)}; gave up after ${attempt} ${attempt === 1 ? 'try' : 'tries'} in ${seconds} s`,
        )
      }
      await sleep(backoff)
    }
  }
}
