import type { Readable } from 'node:stream'
import { connectOperatorSocket, forwardCommand } from '../operator/client.js'
import { errorLine } from '../operator/errors.js'
import { openInput } from './input.js'

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
  const exit = await forwardCommand(socket, argv, input, { stdout: process.stdout, stderr: process.stderr })
  // Standard input left open (the server stopped first) would keep this process alive.
  input?.destroy()
  return exit
}
