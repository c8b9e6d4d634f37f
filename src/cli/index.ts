import { ConfigError, loadConfig } from '../config.js'
import { errorLine } from '../operator-error.js'
import { forwardToServer } from './forward.js'
import { localContext } from './local.js'
import { runCli } from './program.js'

/**
 * Exit status of a command whose reader went away (`openbook orgs list | head -1`): what a Unix
 * tool killed by SIGPIPE reports (128 + 13), and nothing on stderr, as such a tool says nothing.
 */
const CLOSED_PIPE_EXIT = 141

/** A closed pipe on stdout or stderr ends the command quietly, instead of Node's stack trace of an unhandled 'error'. */
function endQuietlyOnClosedPipe(stream: NodeJS.WriteStream): void {
  stream.on('error', (error: NodeJS.ErrnoException) => {
    if (error.code === 'EPIPE') process.exit(CLOSED_PIPE_EXIT)
    throw error
  })
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
    const exit = await forwardToServer(config.dataDir, argv)
    if (exit !== undefined) return exit
  }
  return runCli(argv, localContext(config, argv))
}

endQuietlyOnClosedPipe(process.stdout)
endQuietlyOnClosedPipe(process.stderr)

main(process.argv.slice(2)).then(
  (code) => {
    process.exitCode = code
  },
  (error: unknown) => {
    process.stderr.write(errorLine((error as Error).message?.split('\n')[0] ?? 'failed'))
    process.exitCode = 1
  },
)
