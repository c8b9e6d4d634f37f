import { mkdirSync } from 'node:fs'
import { Worker } from 'node:worker_threads'
import { errorLine } from '../../operator-error.js'
import { StoreBusyError } from '../busy.js'
import { type DataDirLock, lockDataDir } from '../data-dir-lock.js'
import { explainOpenFailure, freeBytes } from '../open-failure.js'
import { readerPreamble } from '../reader-settings.js'
import { rowParserWorks } from '../row-parser.js'
import { type AdminSql, KEY_ORGANIZATION, type Store, type StoreAdapter } from '../types.js'
import { type AutovacuumOptions, startAutovacuum } from './embedded-autovacuum-schedule.js'
import {
  type DatabaseMessage,
  type DatabaseRequest,
  type DatabaseResponse,
  type DataDirOrigin,
  deserializeError,
  GIVEN_UP,
  KEY_ORGANIZATION_PARAM,
  type ResultBytes,
  type WorkerData,
} from './embedded-protocol.js'
import { EMBEDDED_THREAD_YOUNG_MB } from './embedded-settings.js'

/** Answers' memory held for the thread between two messages, at most. */
const SPARE_HELD = 64

/**
 * The database thread from the main thread's side: one request at a time, answered in order.
 * The thread keeps the process alive only while a request is pending.
 */
class DatabaseThread {
  readonly #worker: Worker
  readonly #pending = new Map<number, { resolve: (value: unknown) => void; reject: (error: Error) => void }>()
  #nextId = 0
  #stopped: Error | undefined
  #spare: ArrayBuffer[] = []

  constructor(dataDir: string, shortLived: boolean, template: string | false | undefined) {
    const workerData: WorkerData = { dataDir, shortLived, ...(template === undefined ? {} : { template }) }
    const resourceLimits = { maxYoungGenerationSizeMb: EMBEDDED_THREAD_YOUNG_MB }
    const here = import.meta.url
    if (here.endsWith('.ts')) {
      // Running from source (tests, tsx): the worker's TypeScript goes through tsx as well.
      const source = JSON.stringify(new URL('./embedded-worker.ts', here).href)
      const code = `import('tsx/esm/api').then(({ tsImport }) => tsImport(${source}, ${JSON.stringify(here)}))`
      this.#worker = new Worker(code, { eval: true, workerData, resourceLimits })
    } else {
      this.#worker = new Worker(new URL('./embedded-worker.js', here), { workerData, resourceLimits })
    }
    this.#worker.unref()
    this.#worker.on('message', (response: DatabaseResponse) => this.#settle(response))
    this.#worker.on('error', (error) => this.#stop(error))
    this.#worker.on('exit', (code) =>
      this.#stop(new Error(`the embedded database thread stopped (exit ${code})`)),
    )
  }

  call<T>(request: DatabaseRequest): Promise<T> {
    if (this.#stopped) return Promise.reject(this.#stopped)
    const id = this.#nextId++
    if (this.#pending.size === 0) this.#worker.ref()
    return new Promise<T>((resolve, reject) => {
      this.#pending.set(id, { resolve: resolve as (value: unknown) => void, reject })
      const spare = this.#spare
      if (spare.length === 0) return this.#worker.postMessage({ id, request } satisfies DatabaseMessage)
      this.#spare = []
      this.#worker.postMessage({ id, request, spare } satisfies DatabaseMessage, spare)
    })
  }

  /**
   * An answer's memory (`ResultBytes.rows`) once nothing reads it: it goes back with the next
   * message, and the thread puts another answer in it (embedded-worker.ts `answerMemory`).
   */
  giveBack(memory: ArrayBuffer): void {
    if (this.#spare.length < SPARE_HELD && !this.#spare.includes(memory)) this.#spare.push(memory)
  }

  async terminate(): Promise<void> {
    await this.#worker.terminate()
  }

  #settle(response: DatabaseResponse): void {
    const pending = this.#pending.get(response.id)
    if (!pending) return
    this.#pending.delete(response.id)
    if (this.#pending.size === 0) this.#worker.unref()
    if (response.ok) pending.resolve(response.value)
    else pending.reject(deserializeError(response.error))
  }

  #stop(error: Error): void {
    this.#stopped ??= error
    for (const pending of this.#pending.values()) pending.reject(this.#stopped)
    this.#pending.clear()
  }
}

/** `KEY_ORGANIZATION` in `params` as the message carries it (`KEY_ORGANIZATION_PARAM`). */
const paramsOf = (params: readonly unknown[]) =>
  params.includes(KEY_ORGANIZATION)
    ? params.map((param) => (param === KEY_ORGANIZATION ? KEY_ORGANIZATION_PARAM : param))
    : params

/** How a transaction's statements reach the thread (`runTransaction`). */
interface Statements {
  /** Whether the transaction is still open on this side. */
  readonly isOpen: () => boolean
  /** Whether a statement has ended it on the thread (`ended`): later ones go `again`. */
  readonly endedThere: () => boolean
  /**
   * A read-only request transaction ends with the statement that names the key's organization
   * (`KEY_ORGANIZATION`: the page, sent with the key lookup), as on PostgreSQL, where that
   * statement's message is the whole transaction: called as it is sent, to hand the turn on.
   */
  readonly ended?: () => void
  /** A statement after the transaction ended: in a transaction of its own, in its turn. */
  readonly again: <T>(run: (sql: AdminSql) => Promise<T>) => Promise<T>
}

/**
 * One transaction's connection: it refuses work once its transaction has ended. The thread runs
 * messages in the order they come, so a statement sent without waiting for the one before goes in
 * the same turn of the thread: `sendWithNext` sends at once, and the work's statements follow it
 * before its answer is back (the key lookup and the page in one trip: plugins/auth.ts).
 *
 * On the request path the page ends the transaction as it is sent (`Statements.ended`), as the
 * PostgreSQL store's one message does: the next request's messages follow it to the thread before
 * its answer is back, so the thread does not wait for this side between two requests. A statement
 * after it opens a transaction again, with the same settings, as on PostgreSQL.
 */
function sqlOf(thread: DatabaseThread, statements: Statements, requestPath: boolean): AdminSql {
  const call = <T>(request: DatabaseRequest): Promise<T> =>
    statements.isOpen() ? thread.call<T>(request) : Promise.reject(new Error('the transaction has ended'))
  /** Sends a statement that may end the transaction; after the end, in a transaction of its own. */
  const send = <T>(
    request: DatabaseRequest & { op: 'query' | 'queryBytes' },
    again: (sql: AdminSql) => Promise<T>,
  ) => {
    if (statements.endedThere()) return statements.again(again)
    if (!statements.ended || !request.params.includes(KEY_ORGANIZATION_PARAM)) return call<T>(request)
    const sent = call<T>({ ...request, ends: true })
    statements.ended()
    return sent
  }
  const whileOpen = <T>(request: DatabaseRequest, again: (sql: AdminSql) => Promise<T>) =>
    statements.endedThere() ? statements.again(again) : call<T>(request)
  const query = <Row extends object>(text: string, params: readonly unknown[] = []): Promise<Row[]> =>
    send({ op: 'query', text, params: paramsOf(params) }, (sql) => sql.query<Row>(text, params))
  const sendWithNext = <Row extends object>(text: string, params: readonly unknown[] = []): Promise<Row[]> =>
    whileOpen({ op: 'query', text, params: paramsOf(params) }, (sql) => sql.query<Row>(text, params))
  return {
    query,
    ...(requestPath ? { sendWithNext, flush: async () => undefined } : {}),
    exec: (text) => whileOpen<void>({ op: 'exec', text }, (sql) => sql.exec(text)),
    copyIn: (table, columns, text) =>
      whileOpen<void>({ op: 'copy', table, columns, text }, (sql) => sql.copyIn(table, columns, text)),
    ...(rowParserWorks
      ? {
          queryInto: async (sink, text, params = []) => {
            const results = await send<ResultBytes[] | undefined>(
              { op: 'queryBytes', text, params: paramsOf(params) },
              async (sql) => {
                await sql.queryInto?.(sink, text, params)
                return undefined
              },
            )
            for (const { fields, rows } of results ?? []) {
              if (sink.accepts(fields)) {
                const bytes = Buffer.from(rows.buffer, rows.byteOffset, rows.byteLength)
                for (let at = 0; at < bytes.length; at += 1 + bytes.readInt32BE(at + 1))
                  sink.row(bytes, at + 5, bytes.readInt32BE(at + 1))
              }
              // The sink keeps nothing of the bytes past its call.
              thread.giveBack(rows.buffer as ArrayBuffer)
            }
          },
        }
      : {}),
  }
}

/** A page's rows come as bytes from the database thread, written as items here (page-bytes.ts). */
const EMBEDDED_ADAPTER: StoreAdapter = { pageForm: 'rows' }

/** An operator transaction running longer than this is an import or a seed, not a quick command. */
const LONG_OPERATOR_MS = 1_000
/** How long a request may wait for the store before it is answered 503. */
const READ_WAIT_MS = 2_000

/**
 * Transactions and statements between them, one at a time, in the order they were asked for:
 * PGlite runs one transaction at a time. A turn hands on to the next when it ends, or sooner when
 * its last message is on its way to the thread (`release`): the thread runs messages in order.
 */
class Turns {
  #queue: Promise<unknown> = Promise.resolve()
  /** Turns asked for and not yet ended: the one running, and those queued behind it. */
  pending = 0

  take<T>(run: (release: () => void) => Promise<T>): Promise<T> {
    this.pending++
    let release: () => void = () => undefined
    const released = new Promise<void>((resolve) => {
      release = resolve
    })
    const start = () => run(release)
    const done = this.#queue.then(start, start).finally(() => this.pending--)
    this.#queue = Promise.race([released, done.catch(() => undefined)])
    return done
  }

  /** Settles once every turn asked for so far has sent its last message to the thread. */
  drained(): Promise<unknown> {
    return this.#queue
  }
}

interface TransactionKind {
  readonly preamble: string
  /** The request path: its statements are kept prepared in the database thread. */
  readonly prepared: boolean
  /** READ ONLY: its COMMIT cannot change data, so the next transaction need not wait for it. */
  readonly readOnly: boolean
  /** The request path's read: its page ends it (`Statements.ended`). */
  readonly endsWithPage?: boolean
}

/**
 * PGlite in `dataDir` (or in memory with `memory://`), on a thread of its own: the event loop
 * stays free for HTTP while the database works. PGlite runs one transaction at a time, so
 * transactions queue here, in the order they were asked for.
 */
export interface EmbeddedStoreOptions {
  readonly statementTimeoutMs?: number
  /** What this process is, for the message a second process gets: `openbook server`, `openbook import`. */
  readonly command?: string
  /**
   * A command that opens the store briefly (the CLI): PGlite is compiled for a fast start rather
   * than for a small long-running footprint (embedded-settings.ts).
   */
  readonly shortLived?: boolean
  /** DATA_DIR's lock was lost: another process may now write it. Defaults to exiting at once. */
  readonly onLockLost?: (error: Error) => void
  /** The template a new DATA_DIR is copied from; false: none. Defaults to the build's (embedded-template.ts). */
  readonly template?: string | false
  /** Told how DATA_DIR was opened: as it was, or made new (from the template, or by initdb and why). */
  readonly onOpened?: (origin: DataDirOrigin) => void
  /**
   * What autovacuum would do, in the store's idle time (embedded-autovacuum-schedule.ts); false:
   * nothing. Defaults to on with PostgreSQL's thresholds, unless `shortLived`.
   */
  readonly autovacuum?: AutovacuumOptions | false
}

function exitOnLockLost(error: Error): void {
  process.stderr.write(
    errorLine(`lost the lock on DATA_DIR (${error.message}); stopping to protect the data`),
  )
  process.exit(1)
}

/**
 * Runs `work` in a transaction on the thread. Every step is a message to the database thread,
 * which idles between them: so BEGIN is not waited for, and a read-only transaction's COMMIT only
 * queued. The thread runs messages in order, so the next transaction still begins after it: once
 * this one's end is sent (`release`), or its page, which ends it on the thread (`sqlOf`).
 */
async function runTransaction<T>(
  thread: DatabaseThread,
  { kind, startBy }: { kind: TransactionKind; startBy: number | undefined },
  work: (sql: AdminSql) => Promise<T>,
  release: () => void,
  again: <R>(run: (sql: AdminSql) => Promise<R>) => Promise<R>,
): Promise<T> {
  const { preamble, prepared, readOnly } = kind
  const begun = thread.call<void>({
    op: 'begin',
    preamble,
    prepared,
    readOnly,
    ...(startBy === undefined ? {} : { startBy }),
  })
  begun.catch(() => undefined)
  let open = true
  /** The thread ended the transaction with a statement: no end is sent from here. */
  let endedThere = false
  const statements: Statements = {
    isOpen: () => open,
    endedThere: () => endedThere,
    again,
    ...(kind.endsWithPage
      ? {
          ended: () => {
            endedThere = true
            release()
          },
        }
      : {}),
  }
  let result: T
  try {
    result = await work(sqlOf(thread, statements, prepared))
  } catch (error) {
    open = false
    if (!endedThere) {
      const ended = thread.call({ op: 'end', commit: false }).catch(() => undefined)
      release()
      await ended
    }
    await begun
    throw error
  }
  open = false
  await begun
  if (endedThere) return result
  const ended = thread.call<void>({ op: 'end', commit: true })
  release()
  if (readOnly) ended.catch(() => undefined)
  else await ended
  return result
}

/** Locks DATA_DIR (unless in memory) and opens PGlite in it on a thread of its own. */
async function openThread(
  dataDir: string,
  options: EmbeddedStoreOptions,
): Promise<{ thread: DatabaseThread; lock: DataDirLock | undefined }> {
  let lock: DataDirLock | undefined
  if (!dataDir.startsWith('memory://')) {
    // A new DATA_DIR is its owner's alone: it holds key hashes and customers' personal data.
    mkdirSync(dataDir, { recursive: true, mode: 0o700 })
    lock = await lockDataDir(dataDir, {
      command: options.command ?? 'openbook',
      onCompromised: options.onLockLost ?? exitOnLockLost,
    })
  }
  const thread = new DatabaseThread(dataDir, options.shortLived ?? false, options.template)
  let origin: DataDirOrigin
  try {
    origin = await thread.call<DataDirOrigin>({ op: 'open' })
  } catch (error) {
    await thread.terminate()
    await lock?.release()
    // A full disk, or files PGlite cannot start on, said in words with what to do.
    throw dataDir.startsWith('memory://')
      ? error
      : explainOpenFailure(dataDir, error, await freeBytes(dataDir))
  }
  options.onOpened?.(origin)
  return { thread, lock }
}

export async function createEmbeddedStore(
  dataDir: string,
  options: EmbeddedStoreOptions = {},
): Promise<Store> {
  const statementTimeoutMs = options.statementTimeoutMs ?? 5_000
  const { thread, lock } = await openThread(dataDir, options)
  const turns = new Turns()
  /** When the operator transaction now running began (an import or seed can hold the store for minutes). */
  let operatorSince: number | undefined

  /** Runs `work` in a transaction once the ones before it have ended. */
  const transaction = <T>(
    kind: TransactionKind,
    work: (sql: AdminSql) => Promise<T>,
    startBy?: number,
  ): Promise<T> =>
    turns.take((release) =>
      runTransaction(thread, { kind, startBy }, work, release, (again) => transaction(kind, again)),
    )

  /**
   * An operator transaction. One that fails after running for a while (a cancelled import or seed)
   * leaves its rows behind as dead tuples, and PGlite has no autovacuum: they are vacuumed at once,
   * so that reads do not wade through them until the next start.
   */
  async function operatorTransaction<T>(work: (sql: AdminSql) => Promise<T>): Promise<T> {
    const run = async (sql: AdminSql) => {
      operatorSince = Date.now()
      try {
        return await work(sql)
      } finally {
        operatorSince = undefined
      }
    }
    const started = Date.now()
    try {
      const result = await transaction(admin, run)
      autovacuum?.wrote()
      return result
    } catch (error) {
      if (Date.now() - started > LONG_OPERATOR_MS) {
        await maintain('VACUUM').catch(() => undefined)
      }
      throw error
    }
  }

  /** A statement outside any transaction, in its turn between transactions. */
  function maintain(statement: string): Promise<void> {
    return turns.take(() => thread.call<void>({ op: 'maintain', text: statement }))
  }

  /**
   * The request path waits for the transactions ahead of it, but not for long: while an import or
   * a seed holds the store, or when a request cannot start within READ_WAIT_MS, it is refused at
   * once with StoreBusyError (503 and Retry-After), rather than left to time out without an answer.
   */
  function requestTransaction<T>(work: (sql: AdminSql) => Promise<T>): Promise<T> {
    if (operatorSince !== undefined && Date.now() - operatorSince > LONG_OPERATOR_MS) {
      return Promise.reject(
        new StoreBusyError('The embedded store is busy with an import or seed; retry shortly', 5),
      )
    }
    let abandoned = false
    let timer: NodeJS.Timeout | undefined
    const busy = () => new StoreBusyError('The embedded store is busy; retry shortly', 1)
    // Its turn here may come at once, its messages then queued on the thread behind those of the
    // requests before it: the thread too gives it up past the same instant (`startBy`).
    const startBy = Date.now() + READ_WAIT_MS
    const done = transaction(
      read,
      (sql) => {
        clearTimeout(timer)
        if (abandoned) return Promise.reject(new StoreBusyError('abandoned'))
        return work(sql)
      },
      startBy,
    )
    return new Promise<T>((resolve, reject) => {
      timer = setTimeout(() => {
        abandoned = true
        reject(busy())
      }, READ_WAIT_MS)
      done.then(resolve, (error) =>
        reject(error instanceof Error && error.name === GIVEN_UP ? busy() : error),
      )
    })
  }

  const read: TransactionKind = {
    preamble: readerPreamble(true, statementTimeoutMs),
    prepared: true,
    readOnly: true,
    endsWithPage: true,
  }
  const asReader: TransactionKind = {
    preamble: readerPreamble(false, statementTimeoutMs),
    prepared: true,
    readOnly: false,
  }
  const admin: TransactionKind = { preamble: '', prepared: false, readOnly: false }

  const autovacuumOptions = options.autovacuum ?? (options.shortLived ? false : {})
  const autovacuum =
    autovacuumOptions === false
      ? undefined
      : startAutovacuum(autovacuumOptions, {
          maintain,
          counters: (text) => transaction(admin, (sql) => sql.query(text)),
          idle: () => turns.pending === 0,
        })

  return {
    kind: 'embedded',
    adapter: EMBEDDED_ADAPTER,
    concurrentReads: false,
    read: requestTransaction,
    asReader: (work) => transaction(asReader, work),
    admin: operatorTransaction,
    maintain,
    // The readiness check waits its turn like a request, and is refused like one during a long import.
    probe: (work) =>
      operatorSince !== undefined && Date.now() - operatorSince > LONG_OPERATOR_MS
        ? Promise.reject(new StoreBusyError('The embedded store is busy with an import or seed', 5))
        : transaction(admin, work),
    holder: () =>
      operatorSince === undefined
        ? undefined
        : {
            what: `pid ${process.pid} (${options.command ?? 'openbook'}: an operator's transaction)`,
            since: new Date(operatorSince),
          },
    // PGlite is one connection: busy while a transaction runs, the others wait for it.
    pools: () => [
      {
        database: 'embedded',
        total: 1,
        idle: turns.pending === 0 ? 1 : 0,
        waiting: Math.max(0, turns.pending - 1),
      },
    ],
    async close() {
      await autovacuum?.stop()
      await turns.drained()
      try {
        await thread.call({ op: 'close' })
      } finally {
        await thread.terminate()
        await lock?.release()
      }
    },
  }
}
