/**
 * `@openbook/client/sync`: openbook-sync as functions, for a job that runs it from its own code
 * (a scheduler in Node, a worker) rather than as a command. Node only (it writes files, and
 * `runPgSync` needs the optional peer dependency `pg`).
 */
export { type PgSyncOptions, PgTargetError, runPgSync } from './pg.js'
export {
  CHECKPOINT,
  runSync,
  SYNC_RETRY,
  SyncBusyError,
  type SyncOptions,
  type SyncProgress,
  type SyncResource,
  type SyncSummary,
  SyncTargetError,
  SyncUsageError,
} from './sync.js'
