import { chmodSync, existsSync, rmSync } from 'node:fs'
import { createConnection, createServer, type Server, type Socket } from 'node:net'
import { resolve } from 'node:path'
import { PassThrough, type Readable, Transform, type TransformCallback } from 'node:stream'

/**
 * PGlite is one process's database. While the embedded server holds it, the CLI hands its
 * command to the server over a Unix socket in DATA_DIR (owner only) and the server runs it
 * against the store it already has open.
 *
 * Protocol:
 * - the client sends one JSON line `{argv, input}`; with `input`, the command's input follows
 *   as frames (a 4-byte big-endian length, then that many bytes), closed by an empty frame: the
 *   end-of-input marker. Input that stops short of the marker (the client was interrupted or
 *   died) is an error, so an import never commits a part of its file;
 * - the server answers with JSON lines `{o}`, `{e}` and finally `{exit}`, then closes;
 * - the client keeps its side open until then: its end before `{exit}` means it went away
 *   (Ctrl-C, kill), which cancels the command, and its transaction rolls back.
 */
export function operatorSocketPath(dataDir: string): string {
  return resolve(dataDir, 'openbook.sock')
}

export interface ForwardedIo {
  readonly stdout: { write(text: string): unknown }
  readonly stderr: { write(text: string): unknown }
  readonly stdin: Readable
  /** Aborted when the client goes away or the server stops: the command must roll back. */
  readonly signal: AbortSignal
}

export type CommandRunner = (argv: string[], io: ForwardedIo) => Promise<number>

/** The header line's size limit; argv is a handful of words. */
const MAX_HEADER_BYTES = 64 * 1024

export class InputCutShortError extends Error {
  constructor() {
    super('the input ended before its end-of-input marker (the client went away): nothing was imported')
  }
}

/** Frames a byte stream: each chunk as length + bytes, then the empty end-of-input frame. */
export class InputFramer extends Transform {
  override _transform(chunk: Buffer, _encoding: BufferEncoding, done: TransformCallback): void {
    if (chunk.length === 0) {
      done()
      return
    }
    const length = Buffer.alloc(4)
    length.writeUInt32BE(chunk.length)
    this.push(length)
    done(null, chunk)
  }

  override _flush(done: TransformCallback): void {
    done(null, Buffer.alloc(4))
  }
}

/** Reads frames back into the bytes they carry; ends at the end-of-input marker only. */
export class InputUnframer extends Transform {
  #pending: Buffer = Buffer.alloc(0)
  #ended = false

  override _transform(chunk: Buffer, _encoding: BufferEncoding, done: TransformCallback): void {
    if (this.#ended) {
      done()
      return
    }
    this.#pending = this.#pending.length ? Buffer.concat([this.#pending, chunk]) : chunk
    while (this.#pending.length >= 4) {
      const length = this.#pending.readUInt32BE(0)
      if (length === 0) {
        this.#ended = true
        this.#pending = Buffer.alloc(0)
        this.push(null)
        done()
        return
      }
      if (this.#pending.length < 4 + length) break
      this.push(this.#pending.subarray(4, 4 + length))
      this.#pending = this.#pending.subarray(4 + length)
    }
    done()
  }

  override _flush(done: TransformCallback): void {
    done(this.#ended ? null : new InputCutShortError())
  }

  get complete(): boolean {
    return this.#ended
  }
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

/** Sets umask 077 and returns what restores the previous one (a no-op where umask is unavailable). */
function privateUmask(): () => void {
  try {
    const previous = process.umask(0o077)
    return () => process.umask(previous)
  } catch {
    return () => {} // worker threads cannot change the umask; chmod below still applies
  }
}

export interface OperatorServer {
  /** Stops accepting commands and cancels those running; resolves when they have ended. */
  close(): Promise<void>
}

export async function serveOperatorSocket(dataDir: string, run: CommandRunner): Promise<OperatorServer> {
  const path = operatorSocketPath(dataDir)
  // This process holds DATA_DIR's lock: a socket file here is a dead server's.
  if (existsSync(path)) rmSync(path)
  const running = new Set<{ controller: AbortController; done: Promise<unknown> }>()
  // Half-open, so that a client's end is seen as such (it went away) rather than closing the socket.
  const server: Server = createServer({ allowHalfOpen: true }, (socket) => {
    const controller = new AbortController()
    let answered = false
    socket.on('error', () => socket.destroy())
    const wentAway = () => {
      if (!answered) controller.abort(new Error('the operator client went away'))
    }
    socket.on('end', wentAway)
    socket.on('close', wentAway)
    readHeader(socket, (header, rest) => {
      const send = (message: object) => socket.writable && socket.write(`${JSON.stringify(message)}\n`)
      const finish = (exit: number) => {
        answered = true
        send({ exit })
        socket.end()
        // A command that failed early leaves input unread: discard it, so that the client, told
        // the outcome, is not left sending into a socket nobody reads.
        socket.unpipe()
        socket.resume()
      }
      let argv: string[]
      let hasInput: boolean
      try {
        const parsed = JSON.parse(header) as { argv?: unknown; input?: unknown }
        if (!Array.isArray(parsed.argv) || !parsed.argv.every((a) => typeof a === 'string')) throw new Error()
        argv = parsed.argv
        hasInput = parsed.input === true
      } catch {
        send({ e: 'openbook: bad request on the operator socket\n' })
        return finish(2)
      }
      const stdin = new PassThrough()
      if (hasInput) {
        // pipe(), not pipeline(): the socket must outlive its input, to carry the answer.
        const unframer = new InputUnframer()
        unframer.on('error', (error) => stdin.destroy(error))
        unframer.write(rest)
        socket.pipe(unframer).pipe(stdin)
      } else {
        stdin.end()
        socket.resume()
      }
      const done = run(argv, {
        stdout: { write: (text) => send({ o: text }) },
        stderr: { write: (text) => send({ e: text }) },
        stdin,
        signal: controller.signal,
      })
        .catch(() => 1)
        .then(finish)
      const entry = { controller, done }
      running.add(entry)
      void done.finally(() => running.delete(entry))
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

/**
 * Runs a command in the server behind `socket`, relaying its output; resolves to its exit status.
 * A server that goes away before answering is reported in one line, with exit 1.
 */
export function forwardCommand(
  socket: Socket,
  argv: readonly string[],
  input: Readable | undefined,
  io: Omit<ForwardedIo, 'stdin' | 'signal'>,
): Promise<number> {
  return new Promise((resolveExit) => {
    let exit: number | undefined
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
        if (message.exit !== undefined) {
          exit = message.exit
          // The outcome is known: whatever input is left is not needed.
          input?.unpipe()
          socket.end()
        }
        newline = buffer.indexOf('\n')
      }
    })
    socket.on('close', () => {
      if (exit === undefined) {
        io.stderr.write(
          'openbook: the embedded server stopped before the command finished; an import or seed was rolled back, ' +
            'other commands may not have run\n',
        )
      }
      resolveExit(exit ?? 1)
    })
    socket.on('error', () => undefined)
    socket.write(`${JSON.stringify({ argv, input: input !== undefined })}\n`)
    if (!input) return
    // The end-of-input marker is sent only when the input really ended: a failed read sends none,
    // and the server rolls the command back.
    const framer = new InputFramer()
    input.on('error', (error) => {
      io.stderr.write(`openbook: cannot read the input: ${error.message}\n`)
      socket.destroy()
    })
    input.pipe(framer).pipe(socket, { end: false })
  })
}
