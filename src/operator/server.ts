import { chmodSync, existsSync, rmSync } from 'node:fs'
import { createServer, type Server, type Socket } from 'node:net'
import { PassThrough } from 'node:stream'
import { errorLine } from '../operator-error.js'
import { InputUnframer } from './framing.js'
import {
  type Answer,
  type CommandRunner,
  MAX_HEADER_BYTES,
  messageLine,
  operatorSocketPath,
  type Request,
  type ServerRelease,
} from './protocol.js'

/** The server's side of the operator socket (protocol.ts): runs each forwarded command, relays its output. */

export interface OperatorServer {
  /** Stops accepting commands and cancels those running; resolves when they have ended. */
  close(): Promise<void>
}

interface Running {
  readonly controller: AbortController
  readonly done: Promise<unknown>
}

function readHeader(socket: Socket, onHeader: (header: string, rest: Buffer) => void): void {
  let buffer = Buffer.alloc(0)
  const onData = (chunk: Buffer) => {
    buffer = Buffer.concat([buffer, chunk])
    const newline = buffer.indexOf(10)
    if (newline === -1) {
      if (buffer.length > MAX_HEADER_BYTES) socket.destroy()
      return
    }
    socket.off('data', onData)
    socket.pause()
    onHeader(buffer.subarray(0, newline).toString('utf8'), buffer.subarray(newline + 1))
  }
  socket.on('data', onData)
}

function parseRequest(header: string): Request | undefined {
  try {
    const parsed = JSON.parse(header) as { argv?: unknown; input?: unknown }
    if (!Array.isArray(parsed.argv) || !parsed.argv.every((a) => typeof a === 'string')) return undefined
    const pid = (parsed as { pid?: unknown }).pid
    return {
      argv: parsed.argv,
      input: parsed.input === true,
      ...(Number.isSafeInteger(pid) && (pid as number) > 0 ? { pid: pid as number } : {}),
    }
  } catch {
    return undefined
  }
}

/** The command's standard input: the frames that follow the header, or nothing. */
function commandInput(socket: Socket, rest: Buffer, framed: boolean): PassThrough {
  const stdin = new PassThrough()
  if (framed) {
    // pipe(), not pipeline(): the socket must outlive its input, to carry the answer.
    const unframer = new InputUnframer()
    unframer.on('error', (error) => stdin.destroy(error))
    unframer.write(rest)
    socket.pipe(unframer).pipe(stdin)
  } else {
    stdin.end()
    socket.resume()
  }
  return stdin
}

/** One client: its request, its command run against the server's store, and the answer. */
function serveClient(
  socket: Socket,
  run: CommandRunner,
  running: Set<Running>,
  release: ServerRelease,
): void {
  const controller = new AbortController()
  let answered = false
  socket.on('error', () => socket.destroy())
  const wentAway = () => {
    if (!answered) controller.abort(new Error('the operator client went away'))
  }
  socket.on('end', wentAway)
  socket.on('close', wentAway)
  readHeader(socket, (header, rest) => {
    const send = (message: Answer) => socket.writable && socket.write(messageLine(message))
    const finish = (exit: number) => {
      answered = true
      send({ exit })
      socket.end()
      // A command that failed early leaves input unread: discard it, so that the client, told
      // the outcome, is not left sending into a socket nobody reads.
      socket.unpipe()
      socket.resume()
    }
    send({ server: release })
    const request = parseRequest(header)
    if (!request) {
      send({ e: errorLine('bad request on the operator socket') })
      return finish(2)
    }
    const done = run([...request.argv], {
      stdout: { write: (text) => send({ o: text }) },
      stderr: { write: (text) => send({ e: text }) },
      stdin: commandInput(socket, rest, request.input),
      signal: controller.signal,
      ...(request.pid ? { clientPid: request.pid } : {}),
    })
      .catch(() => 1)
      .then(finish)
    const entry = { controller, done }
    running.add(entry)
    void done.finally(() => running.delete(entry))
  })
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

/**
 * Owner only: whoever can connect runs operator commands (creating API keys among them). The
 * socket is created under a private umask (bind happens inside listen), then made 0600 anyway.
 */
async function listenPrivately(server: Server, path: string): Promise<void> {
  await new Promise<void>((resolveListen, reject) => {
    server.once('error', reject)
    const restore = privateUmask()
    try {
      server.listen(path, () => resolveListen())
    } finally {
      restore()
    }
  })
  chmodSync(path, 0o600)
}

export async function serveOperatorSocket(
  dataDir: string,
  run: CommandRunner,
  release: ServerRelease,
): Promise<OperatorServer> {
  const path = operatorSocketPath(dataDir)
  // This process holds DATA_DIR's lock: a socket file here is a dead server's.
  if (existsSync(path)) rmSync(path)
  const running = new Set<Running>()
  // Half-open, so that a client's end is seen as such (it went away) rather than closing the socket.
  const server = createServer({ allowHalfOpen: true }, (socket) => serveClient(socket, run, running, release))
  await listenPrivately(server, path)
  return {
    async close() {
      server.close()
      for (const { controller } of running)
        controller.abort(
          new Error('the server is stopping: the command was cancelled and nothing of it was written'),
        )
      await Promise.all([...running].map((entry) => entry.done))
    },
  }
}
