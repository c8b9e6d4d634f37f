import { pino } from 'pino'

/**
 * Past this many bytes of lines not yet written, new lines are dropped: the server's memory stays
 * bounded while a log reader has stopped reading, and requests are answered all the same.
 */
export const LOG_BUFFER_LIMIT_BYTES = 16 * 1024 * 1024

/** pino's destination: sonic-boom's stream. */
export type LogDestination = ReturnType<typeof pino.destination>

/**
 * Standard output (or `fd`), written in the background as pino's default destination is, with a
 * bound: the server's own lines and the request log through one buffer, in the order written.
 * pino's default buffers without limit, one buffer per logger: beside a reader that stopped
 * reading (a container's log driver that blocks, a full pipe), every request added its line of
 * about 200 bytes to the server's memory for as long as the reader stayed stopped (700 MB an hour
 * at 1,000 requests a second). pino writes out what is left when the process exits, an exit on a
 * fatal error included.
 */
export function logDestination(
  options: { readonly fd?: number; readonly maxLength?: number } = {},
): LogDestination {
  return pino.destination({
    dest: options.fd ?? 1,
    sync: false,
    maxLength: options.maxLength ?? LOG_BUFFER_LIMIT_BYTES,
  })
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
