import { createReadStream } from 'node:fs'
import { access } from 'node:fs/promises'
import type { Readable } from 'node:stream'
import { ConfigError, loadConfig } from '../config.js'
import { OperatorError } from '../domain/api-keys.js'
import { assertSchemaCurrent } from '../store/migrate.js'
import { openStore } from '../store/open.js'
import { connectOperatorSocket, forwardCommand } from '../store/operator-socket.js'
import type { CliContext } from './context.js'
import { runCli } from './program.js'

async function openInput(file: string): Promise<Readable> {
  if (file === '-') return process.stdin
  try {
    await access(file)
  } catch {
    throw new OperatorError(`cannot read ${file}`)
  }
  return createReadStream(file)
}

async function main(argv: string[]): Promise<number> {
  let config: ReturnType<typeof loadConfig>
  try {
    config = loadConfig()
  } catch (error) {
    if (error instanceof ConfigError) {
      process.stderr.write(`openbook: ${error.message}\n`)
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
          process.stderr.write(`openbook: ${(error as Error).message}\n`)
          return 1
        }
      } else if (argv[0] === 'import' && argv[1] === '-') {
        input = process.stdin
      }
      return forwardCommand(socket, argv, input, { stdout: process.stdout, stderr: process.stderr })
    }
  }

  const context: CliContext = {
    stdout: process.stdout,
    stderr: process.stderr,
    stdin: process.stdin,
    interactive: Boolean(process.stderr.isTTY),
    apiKeyBrand: config.apiKeyBrand,
    openInput,
    async withStore(work, options) {
      const store = await openStore(config)
      try {
        if (!options?.migrating) await assertSchemaCurrent(store)
        return await work(store)
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
    process.stderr.write(`openbook: ${(error as Error).message?.split('\n')[0] ?? 'failed'}\n`)
    process.exitCode = 1
  },
)
