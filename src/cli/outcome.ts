import { OperatorError } from '../operator-error.js'
import { CommitOutcomeUnknownError } from '../store/busy.js'
import { isDiskFull } from '../store/open-failure.js'
import { isStoreUnreachable } from '../store/postgres/postgres.js'

/**
 * What a command says when the database goes away under it (a failover, a pooler or a server
 * restarting): a command that only reads tries again for a while; a command that writes says
 * whether its change was committed, or how to find out.
 */

/** Exit status of a command whose connection was lost while it committed: it may or may not have written. */
export const EXIT_OUTCOME_UNKNOWN = 3

/** The change may or may not have been committed; the message says how to find out (exit 3). */
export class OutcomeUnknownError extends OperatorError {}

/** The database's own words for a failure, after its code: `57P01: terminating connection due to administrator command`. */
export function serverWords(error: unknown): string {
  const cause = error instanceof CommitOutcomeUnknownError ? error.cause : error
  const { code, message } = (cause ?? {}) as { code?: unknown; message?: unknown }
  const words = (typeof message === 'string' ? message.split('\n')[0]?.trim() : '') || 'unknown error'
  return typeof code === 'string' && !words.includes(code) ? `${code}: ${words}` : words
}

/**
 * A failure that passes by itself: the database (or its pooler) refused, lost or ended the
 * session, before or at the COMMIT. Not a full disk, which needs the operator, nor a host name
 * that does not resolve, which is a typo far more often than a failover.
 */
export function isPassingStoreFault(error: unknown): boolean {
  if (error instanceof CommitOutcomeUnknownError) return true
  const { code } = error as { code?: unknown }
  return isStoreUnreachable(error) && !isDiskFull(error) && code !== 'ENOTFOUND'
}

/** What a write is, for its messages: `the new key`, and how to see whether it is there. */
export interface Change {
  /** The change, as the object of "committing …": `the new key of org_1`. */
  readonly what: string
  /** What to do when the outcome is unknown: a command that shows it, or that is safe to run again. */
  readonly check: string
}

/**
 * `work`, the one transaction of a command that writes, with a lost connection said plainly:
 * lost while its COMMIT was under way, the change may or may not be there (OutcomeUnknownError,
 * exit 3, with `change.check`); lost before, the server rolled it back, and nothing was written.
 */
export async function writing<T>(change: Change, work: () => Promise<T>): Promise<T> {
  try {
    return await work()
  } catch (error) {
    if (error instanceof CommitOutcomeUnknownError) {
      throw new OutcomeUnknownError(
        `the connection to the database was lost while committing ${change.what} (${serverWords(error)}): ` +
          `it may or may not have been written; ${change.check}`,
      )
    }
    if (isPassingStoreFault(error)) {
      throw new OperatorError(
        `the connection to the database was lost before ${change.what} was committed (${serverWords(error)}): ` +
          'nothing was written; run the command again',
      )
    }
    throw error
  }
}

/**
 * `work` after a command's change was committed (waiting for the standbys, refreshing statistics):
 * a lost connection says that the change is in, `done`, and what to do (`again`).
 */
export async function afterCommit<T>(done: string, again: string, work: () => Promise<T>): Promise<T> {
  try {
    return await work()
  } catch (error) {
    if (!isPassingStoreFault(error)) throw error
    throw new OperatorError(
      `${done}, committed; then the connection to the database was lost (${serverWords(error)}) ` +
        `before the command was done: ${again}`,
    )
  }
}
