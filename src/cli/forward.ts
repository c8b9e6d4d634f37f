import { Readable } from 'node:stream'
import type { Command } from 'commander'
import { connectOperatorSocket, forwardCommand } from '../operator/client.js'
import type { ServerRelease } from '../operator/protocol.js'
import { errorLine } from '../operator-error.js'
import { LATEST_VERSION } from '../store/schema/schema-version.js'
import type { CliContext } from './context.js'
import { openInput } from './input.js'
import { buildProgram } from './program.js'

/** A context for reading the command tree only: nothing is run with it. */
const TREE_ONLY: CliContext = {
  stdout: { write: () => true },
  stderr: { write: () => true },
  stdin: Readable.from([]),
  interactive: false,
  apiKeyBrand: 'svc',
  openInput: () => Promise.reject(new Error('not run')),
  withStore: () => Promise.reject(new Error('not run')),
}

/**
 * Whether this command line knows the command or option that the server's commander called
 * unknown (`error: unknown command 'show'`, `error: unknown option '--json'`) in `argv`.
 */
function knownHere(kind: string, name: string, argv: readonly string[]): boolean {
  let command: Command = buildProgram(TREE_ONLY)
  const path: Command[] = []
  for (const word of argv) {
    if (word.startsWith('-')) continue
    const sub = command.commands.find((c) => c.name() === word || c.aliases().includes(word))
    if (!sub) break
    command = sub
    path.push(sub)
  }
  if (kind === 'command') return path.some((c) => c.name() === name)
  const flag = name.split('=')[0]
  return [command, ...path].some((c) => c.options.some((o) => o.long === flag || o.short === flag))
}

/** The server's release beside this command line's, in words. */
function releases(server: ServerRelease | undefined): string {
  if (!server) return 'an older openbook (a release from before the operator socket named its version)'
  const ours = `schema version ${LATEST_VERSION}`
  if (server.schema < LATEST_VERSION)
    return `an older openbook (schema version ${server.schema}) than this command line (${ours})`
  if (server.schema > LATEST_VERSION)
    return `a newer openbook (schema version ${server.schema}) than this command line (${ours})`
  return `another release of openbook than this command line (both at ${ours})`
}

/**
 * A command (or option) this command line knows and the server holding DATA_DIR does not: the
 * server runs another release, whatever the schema versions, and the line says so instead of
 * passing on the server's `unknown command`. Undefined for any other line, and for a command
 * that this command line does not know either (the server's own usage error then stands).
 */
export function releaseGap(
  text: string,
  argv: readonly string[],
  server: ServerRelease | undefined,
): string | undefined {
  const unknown = /^error: unknown (command|option) '([^']*)'/.exec(text)
  if (!unknown?.[1] || unknown[2] === undefined || !knownHere(unknown[1], unknown[2], argv)) return undefined
  return errorLine(
    `the embedded server holding DATA_DIR runs ${releases(server)}, and does not know ` +
      `\`openbook ${argv.join(' ')}\`: restart the server with this release, or stop it and run the command again`,
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
  let gapSaid = false
  const writeError = (text: string) => {
    // After the release gap, the server's usage hint is about its own commands: left out.
    if (gapSaid && text.startsWith('(run openbook --help')) return true
    const gap = releaseGap(text, argv, server)
    if (gap) gapSaid = true
    return process.stderr.write(gap ?? text)
  }
  const exit = await forwardCommand(socket, argv, input, {
    stdout: process.stdout,
    stderr: { write: writeError },
    onServer: (release) => {
      server = release
    },
  })
  // Standard input left open (the server stopped first) would keep this process alive.
  input?.destroy()
  return exit
}
