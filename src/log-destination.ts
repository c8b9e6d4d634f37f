import { constants, fstatSync, openSync } from 'node:fs'
import { setTimeout as sleep } from 'node:timers/promises'
import type { pino } from 'pino'
import sonicBoom, { type SonicBoom as SonicBoomStream } from 'sonic-boom'

// A CommonJS module: its class is a member of its export, not a named export Node can see.
const { SonicBoom } = sonicBoom

/**
 * Past this many bytes of lines not yet written, new lines are dropped: the server's memory stays
 * bounded while a log reader has stopped reading, and requests are answered all the same.
 */
export const LOG_BUFFER_LIMIT_BYTES = 16 * 1024 * 1024

/**
 * How long a process's last lines wait for a log reader that does not read: a shutdown's flush,
 * and again the exit after a fatal error.
 */
export const LOG_FLUSH_AT_EXIT_MS = 2_000

/** sonic-boom tries a write that found the pipe full again this often, 100 ms apart. */
const EXIT_WRITE_RETRIES = LOG_FLUSH_AT_EXIT_MS / 100

export type LogDestination = SonicBoomStream

/** Destinations whose output failed, or whose reader a shutdown stopped waiting for. */
const abandoned = new WeakSet<LogDestination>()

/**
 * `fd`, or where it is a pipe, the same pipe opened again without blocking: a write to a full
 * pipe then fails with EAGAIN (and is tried again later) instead of holding a thread until the
 * reader reads, which held the process's exit too. Opened anew, the flag is this process's own:
 * the pipe's other users keep theirs.
 */
function nonBlocking(fd: number): number {
  try {
    if (!fstatSync(fd).isFIFO()) return fd
    return openSync(`/proc/self/fd/${fd}`, constants.O_WRONLY | constants.O_NONBLOCK)
  } catch {
    return fd
  }
}

/**
 * Standard output (or `fd`), written in the background with a bound: the server's own lines and
 * the request log through one buffer, in the order written. pino's default destination (the same
 * stream, sonic-boom 4) buffers without limit, one buffer per logger, so a reader that stopped
 * reading grew the server's memory by every request's line; and its flush at exit retried a
 * write that failed forever, so a server whose reader had gone never exited.
 *
 * What is left is written when the process exits, an exit on a fatal error included, for at most
 * `LOG_FLUSH_AT_EXIT_MS`; a reader that has gone ends the log, not the server. Lines still held
 * when the process is killed (SIGKILL) are lost.
 */
export function logDestination(
  options: { readonly fd?: number; readonly maxLength?: number } = {},
): LogDestination {
  const stream = new SonicBoom({
    fd: nonBlocking(options.fd ?? 1),
    sync: false,
    maxLength: options.maxLength ?? LOG_BUFFER_LIMIT_BYTES,
  })
  // A write that failed for good (the reader has gone: EPIPE): no more lines, and one word of it
  // on stderr. Without a listener, the error would end the process.
  stream.on('error', (error: NodeJS.ErrnoException) => {
    if (abandoned.has(stream)) return
    abandoned.add(stream)
    stream.write = () => true
    process.stderr.write(
      `openbook: the log's output failed (${error.code ?? error.message}); no more lines are written\n`,
    )
  })
  process.once('exit', () => {
    const state = stream as unknown as { destroyed: boolean; maxWriteRetries: number }
    if (abandoned.has(stream) || state.destroyed) return
    state.maxWriteRetries = EXIT_WRITE_RETRIES
    try {
      stream.flushSync()
    } catch {
      // The reader has gone, or did not read within the retries: the rest of the log is lost.
    }
  })
  return stream
}

/**
 * Waits until `destination` has written what it holds, at most `ms`: the last step of a shutdown.
 * A reader that did not read by then is not waited for again at exit.
 */
export async function flushLog(destination: LogDestination, ms = LOG_FLUSH_AT_EXIT_MS): Promise<void> {
  const timeout = new AbortController()
  const flushed = await Promise.race([
    new Promise<boolean>((resolve) => destination.flush(() => resolve(true))),
    sleep(ms, false, { signal: timeout.signal }).catch(() => false),
  ])
  timeout.abort()
  if (!flushed) abandoned.add(destination)
}

/**
 * Counts the lines `destination` drops, and says how many in one line on `log` once its buffer
 * has gone out.
 */
export function warnOfDroppedLines(destination: LogDestination, log: pino.Logger): void {
  let dropped = 0
  destination.on('drop', (data: string) => {
    for (let at = data.indexOf('\n'); at !== -1; at = data.indexOf('\n', at + 1)) dropped++
  })
  destination.on('drain', () => {
    if (dropped === 0) return
    const lines = dropped
    dropped = 0
    log.warn({ droppedLines: lines }, 'log lines dropped: standard output was not read')
  })
}
