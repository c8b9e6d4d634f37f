/**
 * The embedded store's database thread. PGlite runs here, so that its work (PostgreSQL compiled
 * to WebAssembly, and the parsing of results) never blocks the event loop that serves HTTP.
 * The main thread sends one transaction at a time (embedded.ts); requests run in arrival order.
 */
import { parentPort, workerData } from 'node:worker_threads'
import { PGlite, parse, protocol, type Transaction } from '@electric-sql/pglite'
import {
  type DatabaseRequest,
  type DatabaseResponse,
  serializeError,
  type WorkerData,
} from './embedded-protocol.js'
import { copyStatement } from './types.js'

const port = parentPort
if (!port) throw new Error('embedded-worker.js runs as a worker thread of the embedded store')
const { dataDir } = workerData as WorkerData

let db: PGlite | undefined
/** The open transaction: its handle, the way to end it, its outcome, and whether it prepares. */
let open:
  | { tx: Transaction; end: (commit: boolean) => void; finished: Promise<void>; prepared: boolean }
  | undefined

function database(): PGlite {
  if (!db) throw new Error('the embedded database is not open')
  return db
}

function transaction(): Transaction {
  if (!open) throw new Error('no transaction is open')
  return open.tx
}

/** Opens a PGlite transaction that stays open until an `end` request. */
function begin(preamble: string, prepared: boolean): Promise<void> {
  return new Promise((started, failed) => {
    const finished = database().transaction(async (tx) => {
      if (preamble) await tx.exec(preamble)
      const commit = await new Promise<boolean>((end) => {
        open = { tx, end, finished, prepared }
        started()
      })
      if (!commit) await tx.rollback()
    })
    // Before `started`, a failure is the begin's; after, `end` reports it.
    finished.catch(failed)
  })
}

async function end(commit: boolean): Promise<void> {
  if (!open) throw new Error('no transaction is open')
  const { end: close, finished } = open
  open = undefined
  close(commit)
  await finished
}

/** SQL text → the name of its prepared statement. */
const statements = new Map<string, string>()
/** The request path sends a few dozen distinct statements; past this, statements go unnamed. */
const MAX_STATEMENTS = 256

type TextParam = string | number | null

const isTextParam = (value: unknown): value is TextParam =>
  value === null || typeof value === 'string' || typeof value === 'number'

function concat(parts: readonly Uint8Array[]): Uint8Array {
  const out = new Uint8Array(parts.reduce((size, part) => size + part.length, 0))
  let at = 0
  for (const part of parts) {
    out.set(part, at)
    at += part.length
  }
  return out
}

/**
 * A statement of the request path in one call into PGlite, planned once: Parse under a name
 * the first time, then Bind, Describe, Execute and Sync. PGlite's own query() parses and plans
 * every time and crosses into WebAssembly six times; this halves the request's database time
 * (see bench/RESULTS.md, Findings). Parameters go as text, their types inferred by PostgreSQL.
 */
async function preparedQuery(text: string, params: readonly TextParam[]): Promise<unknown[]> {
  const pglite = database()
  const { serialize } = protocol
  const known = statements.get(text)
  const name = known ?? (statements.size < MAX_STATEMENTS ? `openbook_${statements.size}` : '')
  const parts = known === undefined ? [serialize.parse({ name, text, types: [] })] : []
  parts.push(
    serialize.bind({
      statement: name,
      values: params.map((value) => (value === null ? null : String(value))),
    }),
    serialize.describe({ type: 'P' }),
    serialize.execute({}),
    serialize.sync(),
  )
  const { messages } = await pglite.execProtocol(concat(parts), { syncToFs: false, throwOnError: false })
  if (known === undefined && name && messages.some((message) => message.name === 'parseComplete')) {
    statements.set(text, name)
  }
  const error = messages.find((message) => message.name === 'error')
  if (error) throw error
  return parse.parseResults(messages, pglite.parsers)[0]?.rows ?? []
}

async function query(text: string, params: readonly unknown[]): Promise<unknown[]> {
  const tx = transaction()
  if (open?.prepared && params.every(isTextParam)) return preparedQuery(text, params)
  return (await tx.query(text, [...params])).rows
}

async function handle(request: DatabaseRequest): Promise<unknown> {
  switch (request.op) {
    case 'open':
      db = await PGlite.create(dataDir)
      return undefined
    case 'begin':
      return begin(request.preamble, request.prepared)
    case 'query':
      return query(request.text, request.params)
    case 'exec':
      await transaction().exec(request.text)
      return undefined
    case 'copy':
      await transaction().query(copyStatement(request.table, request.columns, "'/dev/blob'"), [], {
        blob: new Blob([request.text]),
      })
      return undefined
    case 'end':
      return end(request.commit)
    case 'close':
      await db?.close()
      db = undefined
      return undefined
  }
}

let queue: Promise<void> = Promise.resolve()

port.on('message', ({ id, request }: { id: number; request: DatabaseRequest }) => {
  queue = queue.then(async () => {
    let response: DatabaseResponse
    try {
      response = { id, ok: true, value: await handle(request) }
    } catch (error) {
      response = { id, ok: false, error: serializeError(error) }
    }
    port.postMessage(response)
  })
})
