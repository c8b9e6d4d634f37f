import { chmodSync, existsSync, rmSync } from 'node:fs'
import { createConnection, createServer, type Server, type Socket } from 'node:net'
import { resolve } from 'node:path'
import { PassThrough, type Readable } from 'node:stream'

/**
 * PGlite is one process's database. While the embedded server holds it, the
 * CLI hands its command to the server over a Unix socket in DATA_DIR (owner
 * only) and the server runs it against the store it already has open.
 *
 * Protocol: the client sends one JSON line {argv}, then the command's input
 * (for import) and ends; the server answers with JSON lines {o}, {e} and
 * finally {exit}.
 */
export function operatorSocketPath(dataDir: string): string {
  return resolve(dataDir, 'openbook.sock')
}

export interface ForwardedIo {
  readonly stdout: { write(text: string): unknown }
  readonly stderr: { write(text: string): unknown }
  readonly stdin: Readable
}

export type CommandRunner = (argv: string[], io: ForwardedIo) => Promise<number>

function splitHeader(socket: Socket, onHeader: (header: string, rest: PassThrough) => void): void {
  let buffer = Buffer.alloc(0)
  const rest = new PassThrough()
  const onData = (chunk: Buffer) => {
    buffer = Buffer.concat([buffer, chunk])
    const newline = buffer.indexOf(10)
    if (newline === -1) {
      if (buffer.length > 1_000_000) socket.destroy()
      return
    }
    socket.off('data', onData)
    rest.write(buffer.subarray(newline + 1))
    socket.pipe(rest)
    onHeader(buffer.subarray(0, newline).toString('utf8'), rest)
  }
  socket.on('data', onData)
}

/** Sets umask 077 and returns what restores the previous one (a no-op where umask is unavailable). */
function privateUmask(): () => void {
  try {
    const previous = process.umask(0o077)
    return () => process.umask(previous)
  } catch {
    return () => {} // worker threads cannot change the umask; chmod below still applies
  }
}

export async function serveOperatorSocket(dataDir: string, run: CommandRunner): Promise<Server> {
  const path = operatorSocketPath(dataDir)
  if (existsSync(path)) rmSync(path)
  // Half-open: the client ends its side after sending the input, and still awaits the answer.
  const server = createServer({ allowHalfOpen: true }, (socket) => {
    socket.on('error', () => socket.destroy())
    splitHeader(socket, (header, stdin) => {
      const send = (message: object) => socket.writable && socket.write(`${JSON.stringify(message)}\n`)
      let argv: string[]
      try {
        argv = (JSON.parse(header) as { argv: string[] }).argv
        if (!Array.isArray(argv) || !argv.every((a) => typeof a === 'string')) throw new Error('bad argv')
      } catch {
        send({ e: 'openbook: bad request on the operator socket\n' })
        send({ exit: 2 })
        socket.end()
        return
      }
      run(argv, {
        stdout: { write: (text) => send({ o: text }) },
        stderr: { write: (text) => send({ e: text }) },
        stdin,
      })
        .catch(() => 1)
        .then((exit) => {
          send({ exit })
          socket.end()
        })
    })
  })
  await new Promise<void>((resolveListen, reject) => {
    server.once('error', reject)
    // Owner only: whoever can connect runs operator commands (creating API keys among them). The
    // socket is created under a private umask (bind happens inside listen), then made 0600 anyway.
    const restore = privateUmask()
    try {
      server.listen(path, () => resolveListen())
    } finally {
      restore()
    }
  })
  chmodSync(path, 0o600)
  return server
}

/** Connects to a running embedded server's operator socket; undefined when none is listening. */
export function connectOperatorSocket(dataDir: string): Promise<Socket | undefined> {
  const path = operatorSocketPath(dataDir)
  if (!existsSync(path)) return Promise.resolve(undefined)
  return new Promise((resolveConnect) => {
    const socket = createConnection(path)
    socket.once('connect', () => resolveConnect(socket))
    socket.once('error', () => resolveConnect(undefined))
  })
}

/** Runs a command in the server behind `socket`, relaying its output; resolves to its exit status. */
export function forwardCommand(
  socket: Socket,
  argv: readonly string[],
  input: Readable | undefined,
  io: Omit<ForwardedIo, 'stdin'>,
): Promise<number> {
  return new Promise((resolveExit) => {
    let exit = 1
    let buffer = ''
    socket.setEncoding('utf8')
    socket.on('data', (chunk: string) => {
      buffer += chunk
      let newline = buffer.indexOf('\n')
      while (newline !== -1) {
        const message = JSON.parse(buffer.slice(0, newline)) as { o?: string; e?: string; exit?: number }
        buffer = buffer.slice(newline + 1)
        if (message.o !== undefined) io.stdout.write(message.o)
        if (message.e !== undefined) io.stderr.write(message.e)
        if (message.exit !== undefined) exit = message.exit
        newline = buffer.indexOf('\n')
      }
    })
    socket.on('close', () => resolveExit(exit))
    socket.on('error', () => resolveExit(1))
    socket.write(`${JSON.stringify({ argv })}\n`)
    if (input) input.pipe(socket)
    else socket.end()
  })
}
