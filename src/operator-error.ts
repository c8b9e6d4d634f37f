import { isDiskFull } from './store/open-failure.js'

/**
 * The operator's errors and the one line they are shown as: a general module beside errors.ts
 * (the API's), because store/, domain/ and import/ throw or write them, and both the CLI and the
 * server's operator socket (operator/) render them.
 */

/** A refusal the operator can act on; the CLI prints its message as the one-line reason. */
export class OperatorError extends Error {}

/** The one line on stderr of a command (or a server start) that fails: `openbook: <reason>`. */
export function errorLine(reason: string): string {
  return `openbook: ${reason}\n`
}

/** One line, and never a stack, SQL or a secret: operator errors say what to do; others say what failed. */
export function failureReason(error: unknown): string {
  if (error instanceof OperatorError) return error.message
  const { code, message } = error as { code?: string; message?: string }
  if (code === 'ECONNREFUSED' || code === 'ENOTFOUND') return `cannot reach the database (${code})`
  if (code === '42P01') return 'the database schema is missing: run `openbook migrate`'
  if (isDiskFull(error)) {
    const said = code === 'XX000' ? 'XX000, could not write init file' : (code ?? 'ENOSPC')
    return (
      `the database's disk is full (${said}); nothing of this command was written: free space on its disk ` +
      "(PostgreSQL's data directory, or DATA_DIR for the embedded store) and run it again; " +
      'running servers recover by themselves once there is room'
    )
  }
  return (message ?? String(error)).split('\n')[0] ?? 'failed'
}
