/** The sync's own failures, as the command's exit codes tell them apart: usage, target, busy. */
import { OpenbookError, UsageError } from '../../errors.js'

/**
 * The command or its files are wrong, and a rerun of the same command will fail the same way:
 * a bad option, a state or table of another sync or organization.
 */
export class SyncUsageError extends UsageError {
  override readonly name: string = 'SyncUsageError'
  constructor(message: string, code = 'sync_usage') {
    super(message, code)
  }
}

/**
 * The output failed: a file that cannot be written (no space, no permission) or PostgreSQL failing
 * during the sync (`code` is the errno or the SQLSTATE). The rows saved so far stay; a rerun
 * resumes once the cause is gone.
 */
export class SyncTargetError extends OpenbookError {
  override readonly name: string = 'SyncTargetError'
  constructor(error: unknown) {
    const code = (error as { code?: unknown } | undefined)?.code
    super({
      error: 'Output failed',
      message: error instanceof Error ? error.message : String(error),
      code: typeof code === 'string' ? code : 'target_failed',
      retryable: true,
      cause: error,
    })
  }
}

/**
 * Another run of openbook-sync is working on the same state (a scheduler started the next run
 * before this one ended): this run did nothing. Not a usage error; the scheduler should not pile
 * up runs.
 */
export class SyncBusyError extends OpenbookError {
  override readonly name: string = 'SyncBusyError'
  constructor(message: string) {
    super({ error: 'Sync busy', message, code: 'sync_busy', retryable: false })
  }
}

/** Errnos of a file that a rerun will not cure: no permission, a directory or a file in the way, a read-only disk. */
const FILE_REFUSALS = new Set([
  'EACCES',
  'EPERM',
  'EISDIR',
  'ENOTDIR',
  'EEXIST',
  'EROFS',
  'ENAMETOOLONG',
  'ELOOP',
])

/**
 * Runs `work`; a failure that is not an OpenbookError (the file system, PostgreSQL) becomes a
 * SyncTargetError, or a SyncUsageError when a rerun will not cure it, except an abort, which is
 * thrown as the signal's reason.
 */
export async function asSyncError<T>(signal: AbortSignal | undefined, work: () => Promise<T>): Promise<T> {
  try {
    return await work()
  } catch (error) {
    if (error instanceof OpenbookError || (signal?.aborted && error === signal.reason)) throw error
    const code = (error as { code?: unknown } | undefined)?.code
    if (typeof code === 'string' && FILE_REFUSALS.has(code))
      throw new SyncUsageError(`${(error as Error).message}: fix the path or its permissions`, code)
    throw new SyncTargetError(error)
  }
}
