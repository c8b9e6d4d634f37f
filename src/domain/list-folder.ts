import type { FastifyBaseLogger } from 'fastify'
import type { FoldReport } from '../store/types.js'

/** Told of each fold's report (its lists that failed among them), and of each fold that failed (the metrics). */
export interface ListFoldObserver {
  listsFolded(report: FoldReport): void
  listFoldFailed(): void
}

export interface ListFolderOptions {
  /** One fold, then the next this many milliseconds after it ended. */
  readonly everyMs: number
  readonly observer?: ListFoldObserver
}

/** The SQLSTATE of a missing privilege. */
const INSUFFICIENT_PRIVILEGE = '42501'

/**
 * Folds the lists' pending changes in the background (`Store.foldLists`, migration 017), so that
 * they stay few whatever isolation level the salon software writes in: a writer's commit folds only
 * in READ COMMITTED. One fold at a time, the next `everyMs` after the last ended, never on a
 * request's connection. A failure (the store unreachable, a missing grant, a list whose fold fails
 * in the database while the others are folded) is logged once until a fold succeeds again, and
 * the folds go on.
 */
export class ListFolder {
  private timer: NodeJS.Timeout | undefined
  private running: Promise<void> | undefined
  private stopped = false
  private failing = false

  constructor(
    private readonly fold: () => Promise<FoldReport>,
    private readonly log: FastifyBaseLogger,
    private readonly options: ListFolderOptions,
  ) {}

  start(): void {
    if (this.stopped || this.timer || this.running) return
    this.schedule()
  }

  /** One fold now (also what the timer runs); resolves when it ended, failed or not. */
  once(): Promise<void> {
    this.running ??= this.run().finally(() => {
      this.running = undefined
    })
    return this.running
  }

  /** Stops the timer and waits for a fold in flight, so that the store can close after it. */
  async stop(): Promise<void> {
    this.stopped = true
    clearTimeout(this.timer)
    this.timer = undefined
    await this.running
  }

  private schedule(): void {
    if (this.stopped) return
    this.timer = setTimeout(() => {
      this.timer = undefined
      void this.once().then(() => this.schedule())
    }, this.options.everyMs)
    // A fold never keeps the process alive.
    this.timer.unref()
  }

  private async run(): Promise<void> {
    try {
      const report = await this.fold()
      this.options.observer?.listsFolded(report)
      if (report.failed > 0) {
        // The other lists were folded; these stay pending, and their pages slow down.
        if (this.failing || this.stopped) return
        this.failing = true
        this.log.warn(
          { failedLists: report.failed, failure: report.failure },
          "list folds: a list's fold failed in the database and its changes stay pending; " +
            'the other lists were folded; trying again, said once until every fold succeeds',
        )
      } else if (this.failing) {
        this.failing = false
        this.log.info({ pending: report.mostPending }, 'list folds: running again')
      }
    } catch (error) {
      this.options.observer?.listFoldFailed()
      if (this.failing || this.stopped) return
      this.failing = true
      const code = (error as { code?: unknown }).code
      if (code === INSUFFICIENT_PRIVILEGE) {
        this.log.error(
          { err: error },
          'list folds: the server cannot fold the lists (openbook_reader lacks EXECUTE on list_fold_pending()); ' +
            'pages slow down as writers outside READ COMMITTED leave changes pending. As the schema owner, run ' +
            '`GRANT EXECUTE ON FUNCTION list_fold_pending() TO openbook_reader`',
        )
      } else {
        this.log.warn({ err: error }, 'list folds: a fold failed; trying again, said once until one succeeds')
      }
    }
  }
}
