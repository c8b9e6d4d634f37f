import { mkdirSync } from 'node:fs'
import { Worker } from 'node:worker_threads'
import {
  type DatabaseRequest,
  type DatabaseResponse,
  deserializeError,
  type WorkerData,
} from './embedded-protocol.js'
import { type AdminSql, readerPreamble, type Store } from './types.js'

/**
 * The database thread from the main thread's side: one request at a time, answered in order.
 * The thread keeps the process alive only while a request is pending.
 */
class DatabaseThread {
  readonly #worker: Worker
  readonly #pending = new Map<number, { resolve: (value: unknown) => void; reject: (error: Error) => void }>()
  #nextId = 0
  #stopped: Error | undefined

  constructor(dataDir: string) {
    const workerData: WorkerData = { dataDir }
    const here = import.meta.url
    if (here.endsWith('.ts')) {
      // Running from source (tests, tsx): the worker's TypeScript goes through tsx as well.
      const source = JSON.stringify(new URL('./embedded-worker.ts', here).href)
      const code = `import('tsx/esm/api').then(({ tsImport }) => tsImport(${source}, ${JSON.stringify(here)}))`
      this.#worker = new Worker(code, { eval: true, workerData })
    } else {
      this.#worker = new Worker(new URL('./embedded-worker.js', here), { workerData })
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
      this.#worker.postMessage({ id, request })
    })
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

/** One transaction's connection: it refuses work once its transaction has ended. */
function sqlOf(thread: DatabaseThread, isOpen: () => boolean): AdminSql {
  const call = <T>(request: DatabaseRequest) =>
    isOpen() ? thread.call<T>(request) : Promise.reject(new Error('the transaction has ended'))
  return {
    jsonPages: true,
    query: <Row extends object>(text: string, params: readonly unknown[] = []) =>
      call<Row[]>({ op: 'query', text, params }),
    exec: (text) => call<void>({ op: 'exec', text }),
    copyIn: (table, columns, text) => call<void>({ op: 'copy', table, columns, text }),
  }
}

/**
 * PGlite in `dataDir` (or in memory with `memory://`), on a thread of its own: the event loop
 * stays free for HTTP while the database works. PGlite runs one transaction at a time, so
 * transactions queue here, in the order they were asked for.
 */
export async function createEmbeddedStore(dataDir: string, statementTimeoutMs = 5_000): Promise<Store> {
  // A new DATA_DIR is its owner's alone: it holds key hashes and customers' personal data.
  if (!dataDir.startsWith('memory://')) mkdirSync(dataDir, { recursive: true, mode: 0o700 })
  const thread = new DatabaseThread(dataDir)
  try {
    await thread.call({ op: 'open' })
  } catch (error) {
    await thread.terminate()
    throw error
  }
  let queue: Promise<unknown> = Promise.resolve()

  function transaction<T>(
    preamble: string,
    prepared: boolean,
    work: (sql: AdminSql) => Promise<T>,
  ): Promise<T> {
    const run = async () => {
      await thread.call({ op: 'begin', preamble, prepared })
      let open = true
      let result: T
      try {
        result = await work(sqlOf(thread, () => open))
      } catch (error) {
        open = false
        await thread.call({ op: 'end', commit: false }).catch(() => undefined)
        throw error
      }
      open = false
      await thread.call({ op: 'end', commit: true })
      return result
    }
    const done = queue.then(run, run)
    queue = done.catch(() => undefined)
    return done
  }

  return {
    kind: 'embedded',
    read: (work) => transaction(readerPreamble(true, statementTimeoutMs), true, work),
    asReader: (work) => transaction(readerPreamble(false, statementTimeoutMs), true, work),
    admin: (work) => transaction('', false, work),
    async close() {
      await queue
      try {
        await thread.call({ op: 'close' })
      } finally {
        await thread.terminate()
      }
    },
  }
}
