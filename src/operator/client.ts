import { existsSync } from 'node:fs'
import { createConnection, type Socket } from 'node:net'
import type { Readable } from 'node:stream'
import { errorLine } from '../operator-error.js'
import { InputFramer } from './framing.js'
import {
  type Answer,
  type ForwardedIo,
  messageLine,
  operatorSocketPath,
  type ServerRelease,
} from './protocol.js'

/** The CLI's side of the operator socket (protocol.ts): sends a command and relays the answer. */

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

type Output = Omit<ForwardedIo, 'stdin' | 'signal'> & {
  /** Told who answers, when the server says (its first line). */
  readonly onServer?: (release: ServerRelease) => void
}

/** Calls `onAnswer` with each answer line as it arrives. */
function readAnswers(socket: Socket, onAnswer: (answer: Answer) => void): void {
  let buffer = ''
  socket.setEncoding('utf8')
  socket.on('data', (chunk: string) => {
    buffer += chunk
    let newline = buffer.indexOf('\n')
    while (newline !== -1) {
      const answer = JSON.parse(buffer.slice(0, newline)) as Answer
      buffer = buffer.slice(newline + 1)
      onAnswer(answer)
      newline = buffer.indexOf('\n')
    }
  })
}

/**
 * Sends `input` as frames. The end-of-input marker is sent only when the input really ended: a
 * failed read sends none, and the server rolls the command back.
 */
function sendInput(socket: Socket, input: Readable, io: Output): void {
  const framer = new InputFramer()
  input.on('error', (error) => {
    io.stderr.write(errorLine(`cannot read the input: ${error.message}`))
    socket.destroy()
  })
  input.pipe(framer).pipe(socket, { end: false })
}

/**
 * Runs a command in the server behind `socket`, relaying its output; resolves to its exit status.
 * A server that goes away before answering is reported in one line, with exit 1.
 */
export function forwardCommand(
  socket: Socket,
  argv: readonly string[],
  input: Readable | undefined,
  io: Output,
): Promise<number> {
  return new Promise((resolveExit) => {
    let exit: number | undefined
    readAnswers(socket, (answer) => {
      if (answer.server !== undefined) io.onServer?.(answer.server)
      if (answer.o !== undefined) io.stdout.write(answer.o)
      if (answer.e !== undefined) io.stderr.write(answer.e)
      if (answer.exit !== undefined) {
        exit = answer.exit
        // The outcome is known: whatever input is left is not needed.
        input?.unpipe()
        socket.end()
      }
    })
    socket.on('close', () => {
      if (exit === undefined) {
        io.stderr.write(
          errorLine(
            'the embedded server stopped before the command finished; an import or seed was rolled back, ' +
              'other commands may not have run',
          ),
        )
      }
      resolveExit(exit ?? 1)
    })
    socket.on('error', () => undefined)
    socket.write(messageLine({ argv, input: input !== undefined, pid: process.pid }))
    if (input) sendInput(socket, input, io)
  })
}
