import { constants, createReadStream } from 'node:fs'
import { access, stat } from 'node:fs/promises'
import type { Readable } from 'node:stream'
import { ConfigError, loadConfig } from '../config.js'
import { cancellable } from '../operator/cancellable.js'
import { connectOperatorSocket, forwardCommand } from '../operator/client.js'
import { errorLine, OperatorError } from '../operator/errors.js'
import { assertSchemaCurrent } from '../store/migrate.js'
import { assertOperatorAccess, openStore } from '../store/open.js'
import type { CliContext } from './context.js'
import { runCli } from './program.js'

async function openInput(file: string): Promise<Readable> {
  if (file === '-') return process.stdin
  let isFile: boolean
  try {
    await access(file, constants.R_OK)
    isFile = (await stat(file)).isFile()
  } catch {
    throw new OperatorError(`cannot read ${file}`)
  }
  if (!isFile) throw new OperatorError(`${file} is not a file`)
  return createReadStream(file)
}

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

async function main(argv: string[]): Promise<number> {
  let config: ReturnType<typeof loadConfig>
  try {
    config = loadConfig()
  } catch (error) {
    if (error instanceof ConfigError) {
      process.stderr.write(errorLine(error.message))
      return 1
    }
    throw error
  }

  // An embedded server holds the PGlite store: hand the command to it.
  if (!config.databaseUrl) {
    const socket = await connectOperatorSocket(config.dataDir)
    if (socket) {
      let input: Readable | undefined
      if (argv[0] === 'import' && argv[1] && !argv[1].startsWith('-')) {
        try {
          input = await openInput(argv[1])
        } catch (error) {
          socket.destroy()
          process.stderr.write(errorLine((error as Error).message))
          return 1
        }
      } else if (argv[0] === 'import' && argv[1] === '-') {
        input = process.stdin
      }
      const exit = await forwardCommand(socket, argv, input, {
        stdout: process.stdout,
        stderr: process.stderr,
      })
      // Standard input left open (the server stopped first) would keep this process alive.
      input?.destroy()
      return exit
    }
  }

  const signal = interruptSignal()
  const context: CliContext = {
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
          await assertSchemaCurrent(store)
        }
        return await work(cancellable(store, signal))
      } finally {
        await store.close()
      }
    },
  }
  return runCli(argv, context)
}

main(process.argv.slice(2)).then(
  (code) => {
    process.exitCode = code
  },
  (error: unknown) => {
    process.stderr.write(errorLine((error as Error).message?.split('\n')[0] ?? 'failed'))
    process.exitCode = 1
  },
)
