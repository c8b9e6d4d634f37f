import { resolve } from 'node:path'
import type { Readable } from 'node:stream'

/**
 * PGlite is one process's database. While the embedded server holds it, the CLI hands its
 * command to the server over a Unix socket in DATA_DIR (owner only) and the server runs it
 * against the store it already has open.
 *
 * Protocol:
 * - the client sends one JSON line `{argv, input}`; with `input`, the command's input follows
 *   as frames (a 4-byte big-endian length, then that many bytes), closed by an empty frame: the
 *   end-of-input marker (framing.ts). Input that stops short of the marker (the client was
 *   interrupted or died) is an error, so an import never commits a part of its file;
 * - the server answers with JSON lines `{server}` (its release), `{o}`, `{e}` and finally `{exit}`,
 *   then closes;
 * - the client keeps its side open until then: its end before `{exit}` means it went away
 *   (Ctrl-C, kill), which cancels the command, and its transaction rolls back.
 */
export function operatorSocketPath(dataDir: string): string {
  return resolve(dataDir, 'openbook.sock')
}

/** The client's first line. */
export interface Request {
  readonly argv: readonly string[]
  /** Framed input follows the line. */
  readonly input: boolean
  /** The client's process id: named to another command that waits for this one. */
  readonly pid?: number
}

/** Who answers: the server's release, by the highest migration it knows (its first line). */
export interface ServerRelease {
  readonly schema: number
}

/**
 * One line of the server's answer: who answers (the first line; the oldest servers send none),
 * output, error output, or the exit status (the last line).
 */
export interface Answer {
  readonly server?: ServerRelease
  readonly o?: string
  readonly e?: string
  readonly exit?: number
}

/** The header line's size limit; argv is a handful of words. */
export const MAX_HEADER_BYTES = 64 * 1024

/** A message of either side as the line it travels as. */
export function messageLine(message: Request | Answer): string {
  return `${JSON.stringify(message)}\n`
}

export interface ForwardedIo {
  readonly stdout: { write(text: string): unknown }
  readonly stderr: { write(text: string): unknown }
  readonly stdin: Readable
  /** Aborted when the client goes away or the server stops: the command must roll back. */
  readonly signal: AbortSignal
  /** The client's process id, when it said. */
  readonly clientPid?: number
}

export type CommandRunner = (argv: string[], io: ForwardedIo) => Promise<number>
