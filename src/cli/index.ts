import { ConfigError, loadConfig } from '../config.js'
import { errorLine } from '../operator-error.js'
import { forwardToServer } from './forward.js'
import { localContext } from './local.js'
import { runCli } from './program.js'

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

main(process.argv.slice(2)).then(
  (code) => {
    process.exitCode = code
  },
  (error: unknown) => {
    process.stderr.write(errorLine((error as Error).message?.split('\n')[0] ?? 'failed'))
    process.exitCode = 1
  },
)
