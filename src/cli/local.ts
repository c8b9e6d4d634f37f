import type { Config } from '../config.js'
import { cancellable } from '../operator/cancellable.js'
import { OperatorError } from '../operator-error.js'
import { assertOperatorAccess, openStore } from '../store/open.js'
import { assertSchemaServable } from '../store/schema/migrate.js'
import type { CliContext } from './context.js'
import { openInput } from './input.js'

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
      // Operator commands write: they run on the primary, never on a read replica.
      const store = await openStore(
        { ...config, databaseReadUrl: undefined },
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
    },
  }
}
