/**
 * `@openbook/client/sync`: openbook-sync as functions, for a job that runs it from its own code
 * (a scheduler in Node, a worker) rather than as a command. Node only (it writes files, and
 * `runPgSync` needs the optional peer dependency `pg`).
 */
export { SyncBusyError, SyncTargetError, SyncUsageError } from './engine/errors.js'
export {
  CHECKPOINT,
  SYNC_RETRY,
  type SyncOptions,
  type SyncProgress,
  type SyncResource,
  type SyncSummary,
} from './engine/options.js'
export { runSync } from './targets/file.js'
export { type PgSyncOptions, PgTargetError, runPgSync } from './targets/pg.js'
