import type { Readable } from 'node:stream'
import { connectOperatorSocket, forwardCommand } from '../operator/client.js'
import type { ServerRelease } from '../operator/protocol.js'
import { errorLine } from '../operator-error.js'
import { LATEST_VERSION } from '../store/schema-version.js'
import { openInput } from './input.js'

/**
 * A command (or option) this command line knows and the server holding DATA_DIR does not, said as
 * the version gap it is, not as the older server's `unknown command`; undefined for any other line.
 */
function versionGap(
  text: string,
  argv: readonly string[],
  server: ServerRelease | undefined,
): string | undefined {
  if (!/^error: unknown (command|option)/.test(text)) return undefined
  if (server && server.schema >= LATEST_VERSION) return undefined
  const release = server
    ? `schema version ${server.schema}`
    : 'a release from before the operator socket named its version'
  return errorLine(
    `the embedded server holding DATA_DIR runs an older openbook (${release}) than this command line ` +
      `(schema version ${LATEST_VERSION}), and does not know \`openbook ${argv.join(' ')}\`: ` +
      'restart the server with this release, or stop it and run the command again',
  )
}

/**
 * Hands the command to the embedded server that holds DATA_DIR, through its operator socket, and
 * resolves to its exit status; undefined when no server is listening (the command runs here).
 */
export async function forwardToServer(dataDir: string, argv: readonly string[]): Promise<number | undefined> {
  const socket = await connectOperatorSocket(dataDir)
  if (!socket) return undefined
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
  let server: ServerRelease | undefined
  const exit = await forwardCommand(socket, argv, input, {
    stdout: process.stdout,
    stderr: { write: (text: string) => process.stderr.write(versionGap(text, argv, server) ?? text) },
    onServer: (release) => {
      server = release
    },
  })
  // Standard input left open (the server stopped first) would keep this process alive.
  input?.destroy()
  return exit
}
