/**
 * The embedded store's database thread. PGlite runs here, so that its work (PostgreSQL compiled
 * to WebAssembly, and the parsing of results) never blocks the event loop that serves HTTP.
 * The main thread sends transactions one after another (embedded.ts), a request's as soon as the
 * page of the one before it is on its way (the page ends its transaction here); they run in
 * arrival order.
 *
 * Every call into PGlite has a fixed cost (the protocol travels through a file of its virtual
 * file system), so the request path makes two: BEGIN and its settings go with the key lookup,
 * and a read-only transaction's COMMIT goes with the next call, whatever it is. Nothing else
 * reaches the database meanwhile: this thread is its only client.
 */
import { spawn } from 'node:child_process'
import { existsSync, readFileSync } from 'node:fs'
import { resolve as absolute, join } from 'node:path'
import { fileURLToPath } from 'node:url'
import { setFlagsFromString } from 'node:v8'
import { parentPort, workerData } from 'node:worker_threads'
import {
  type messages,
  PGlite,
  type PGliteOptions,
  parse,
  protocol,
  type Results,
} from '@electric-sql/pglite'
import { copyStatement } from '../copy.js'
import { rowParser } from '../row-parser.js'
import {
  type DatabaseMessage,
  type DatabaseRequest,
  type DatabaseResponse,
  type DataDirOrigin,
  GIVEN_UP,
  isKeyOrganizationParam,
  type ResultBytes,
  serializeError,
  type WorkerData,
} from './embedded-protocol.js'
import { EMBEDDED_V8_FLAGS, embeddedInitdbParams, embeddedStartParams } from './embedded-settings.js'
import { BUILT_TEMPLATE, copyTemplate, MARKER, pgliteFile } from './embedded-template.js'

const port = parentPort
if (!port) throw new Error('embedded-worker.js runs as a worker thread of the embedded store')
const { dataDir, shortLived = false, template = BUILT_TEMPLATE } = workerData as WorkerData

// Before PGlite's WebAssembly is compiled (see embedded-settings.ts).
if (!shortLived) setFlagsFromString(EMBEDDED_V8_FLAGS)

const options: PGliteOptions = {
  startParams: embeddedStartParams(PGlite.defaultStartParams),
  // initdb writes them to postgresql.conf, and runs with them (a smaller WebAssembly memory).
  initDbStartParams: embeddedInitdbParams(),
}

/**
 * PostgreSQL's WebAssembly (9 MB), read and compiled from the thread's start, on V8's background
 * threads while this one makes DATA_DIR; PGlite would begin only once DATA_DIR is there. V8 compiles
 * its functions lazily (at their first call, which is where a start's seconds of CPU go), so what
 * this moves ahead is the module's decoding and validation, a small part.
 */
const pgliteWasm = (async () => WebAssembly.compile(readFileSync(pgliteFile('pglite.wasm'))))()
// Awaited at open; a failure here is PGlite's own at open.
pgliteWasm.catch(() => undefined)

type BackendMessage = messages.BackendMessage

let db: PGlite | undefined

interface OpenTransaction {
  /** The request path's: its statements are kept prepared (see preparedQuery). */
  readonly prepared: boolean
  readonly readOnly: boolean
  /** BEGIN has gone to the database (it travels with the transaction's first statement). */
  begun: boolean
  /**
   * How many statements were owed when it began: those are not its own (a read-only
   * transaction's COMMIT), and a transaction that ends without a statement leaves them owed.
   */
  readonly owedBefore: number
  /** Begun past its request's `startBy`: its statements are not run. */
  readonly givenUp: boolean
}

let open: OpenTransaction | undefined
/** Statements without parameters owed to the database: they go ahead of the next call. */
let owed: string[] = []

function database(): PGlite {
  if (!db) throw new Error('the embedded database is not open')
  return db
}

function inTransaction(): OpenTransaction {
  if (!open) throw new Error('no transaction is open')
  return open
}

/** The owed statements as a simple-protocol message (none: undefined); the transaction counts as begun. */
function takeOwed(): Uint8Array | undefined {
  if (open) open.begun = true
  if (owed.length === 0) return undefined
  const text = owed.join('; ')
  owed = []
  return protocol.serialize.query(text)
}

function concat(parts: readonly Uint8Array[]): Uint8Array {
  const out = new Uint8Array(parts.reduce((size, part) => size + part.length, 0))
  let at = 0
  for (const part of parts) {
    out.set(part, at)
    at += part.length
  }
  return out
}

/** Sends `parts` in one call; PostgreSQL's answers, errors among them. */
async function send(parts: readonly Uint8Array[]): Promise<BackendMessage[]> {
  return (await database().execProtocol(concat(parts), { syncToFs: false, throwOnError: false })).messages
}

/** The first error PostgreSQL reported, thrown as PGlite's DatabaseError with its fields. */
function throwFirstError(messages: readonly BackendMessage[]): void {
  const error = messages.find((message) => message.name === 'error')
  if (error) throw error
}

/** The owed statements and then `text` (statements without parameters), in one call. */
async function simple(text?: string): Promise<Results[]> {
  const parts = [takeOwed(), text === undefined ? undefined : protocol.serialize.query(text)]
  const present = parts.filter((part): part is Uint8Array => part !== undefined)
  if (present.length === 0) return []
  const messages = await send(present)
  throwFirstError(messages)
  return parse.parseResults(messages, database().parsers)
}

function begin({ preamble, prepared, readOnly, startBy }: DatabaseRequest & { op: 'begin' }): void {
  if (open) throw new Error('a transaction is open already')
  const givenUp = startBy !== undefined && Date.now() > startBy
  open = { prepared, readOnly, begun: false, owedBefore: owed.length, givenUp }
  if (givenUp) return
  owed.push('BEGIN')
  if (preamble) owed.push(preamble)
}

/** Refuses a statement of a transaction begun too late for its request (`startBy`). */
function checkNotGivenUp(): void {
  if (!inTransaction().givenUp) return
  const error = new Error('the request gave up waiting for the database thread')
  error.name = GIVEN_UP
  throw error
}

async function end(commit: boolean): Promise<void> {
  const transaction = inTransaction()
  open = undefined
  if (!transaction.begun) {
    // No statement ran: its BEGIN never left. What was owed before it (the COMMIT of the read-only
    // transaction before it) still is.
    owed = owed.slice(0, transaction.owedBefore)
    return
  }
  if (!commit) {
    await simple('ROLLBACK')
    return
  }
  if (transaction.readOnly) {
    // It wrote nothing; its COMMIT goes ahead of the next call.
    owed.push('COMMIT')
    return
  }
  const results = await simple('COMMIT')
  // COMMIT of a transaction an error aborted answers ROLLBACK: nothing was written.
  if (results.at(-1)?.command === 'ROLLBACK') {
    throw new Error('the transaction was rolled back: a statement in it had failed')
  }
}

/** SQL text → the name of its prepared statement. */
const statements = new Map<string, string>()
/** The request path sends a few dozen distinct statements; past this, statements go unnamed. */
const MAX_STATEMENTS = 256

type TextParam = string | number | null

const isTextParam = (value: unknown): value is TextParam =>
  value === null || typeof value === 'string' || typeof value === 'number'

/**
 * A statement of the request path in one call into PGlite, planned once: Parse under a name
 * the first time, then Bind, Describe, Execute and Sync, behind any owed statements. PGlite's
 * own query() parses and plans every time and crosses into WebAssembly six times (see
 * bench/RESULTS.md, Findings). Parameters go as text, their types inferred by PostgreSQL.
 */
async function preparedQuery(text: string, params: readonly TextParam[]): Promise<unknown[]> {
  const { parts, named } = preparedParts(text, params)
  const messages = await send(parts)
  // Parsed, even if binding or running failed after: the name is taken from now on.
  named(messages.some((message) => message.name === 'parseComplete'))
  throwFirstError(messages)
  return parse.parseResults(messages, database().parsers).at(-1)?.rows ?? []
}

/**
 * The messages of `preparedQuery` (unnamed outside the request path), and `named` to call once
 * the answer tells whether PostgreSQL parsed the statement.
 */
function preparedParts(text: string, params: readonly TextParam[]) {
  const { serialize } = protocol
  const known = statements.get(text)
  const name =
    known ??
    (inTransaction().prepared && statements.size < MAX_STATEMENTS ? `openbook_${statements.size}` : '')
  const parts: Uint8Array[] = []
  const ahead = takeOwed()
  if (ahead) parts.push(ahead)
  if (known === undefined) parts.push(serialize.parse({ name, text, types: [] }))
  parts.push(
    serialize.bind({
      statement: name,
      values: params.map((value) => (value === null ? null : String(value))),
    }),
    serialize.describe({ type: 'P' }),
    serialize.execute({}),
    serialize.sync(),
  )
  const named = (parsed: boolean) => {
    if (known === undefined && name && parsed) statements.set(text, name)
  }
  return { parts, named }
}

/**
 * The memory of answers the main thread has written its items from, handed back with its next
 * message (embedded.ts `DatabaseThread`), to hold another answer: an answer's memory is allocated
 * on this thread and freed on the other, once its collector gets to it, and at a few hundred
 * answers a second that left tens of megabytes waiting in this thread's malloc arena.
 */
const spares: ArrayBuffer[] = []
/** Enough for every request of a few dozen connections; more are let go. */
const SPARES_KEPT = 64

/** `size` bytes for an answer: a spare that holds it, or new memory of the next power of two. */
function answerMemory(size: number): Buffer {
  const at = spares.findIndex((spare) => spare.byteLength >= size)
  const memory = at >= 0 ? spares.splice(at, 1)[0] : undefined
  return Buffer.from(
    memory ?? Buffer.allocUnsafeSlow(2 ** Math.ceil(Math.log2(Math.max(size, 4096)))).buffer,
    0,
    size,
  )
}

/** Where `queryBytes` puts an answer's chunks together: kept between answers up to this size. */
const GATHERED_KEPT = 256 * 1024
let gathered = Buffer.allocUnsafeSlow(64 * 1024)

/**
 * A statement sent as `preparedQuery` sends it, its answer read as bytes: each result's columns
 * and its DataRow messages as PostgreSQL wrote them, for the page's writer on the other side of
 * the thread (embedded.ts). Neither PGlite nor this thread makes a string of a field or an object
 * of a row: the page's items cost the database no JSON functions, and this thread only splits the
 * answer into its messages (store/row-parser.ts).
 */
async function queryBytes(text: string, params: readonly unknown[]): Promise<ResultBytes[]> {
  if (!params.every(isTextParam)) throw new Error('a statement parameter that is not text, a number or NULL')
  const { parts, named } = preparedParts(text, params)
  // The chunks are views of PostgreSQL's memory (about 8 KB each), put together as they come in
  // memory kept from one answer to the next; the answer is then copied once into memory of its
  // own size (not Node's shared pool), which goes to the other thread whole, not copied again.
  let size = 0
  await database().execProtocolRawStream(concat(parts), {
    syncToFs: false,
    onRawData: (chunk) => {
      if (size + chunk.byteLength > gathered.length) {
        const larger = Buffer.allocUnsafeSlow(Math.max(2 * gathered.length, size + chunk.byteLength))
        gathered.copy(larger, 0, 0, size)
        gathered = larger
      }
      gathered.set(chunk, size)
      size += chunk.byteLength
    },
  })
  const answer = answerMemory(size)
  gathered.copy(answer, 0, 0, size)
  if (gathered.length > GATHERED_KEPT) gathered = Buffer.allocUnsafeSlow(GATHERED_KEPT)
  const results: { fields: ResultBytes['fields']; start: number; end: number }[] = []
  let parsed = false
  let error: unknown
  const parser = rowParser(() => ({
    accepts: (fields) => {
      const columns = fields.map(({ name, dataTypeID }) => ({ name, dataTypeID }))
      results.push({ fields: columns, start: 0, end: 0 })
      return true
    },
    // The whole message: its code and length are the 5 bytes before its field count. A result's
    // DataRow messages come one after another: its rows are one view of the answer.
    row: (bytes, offset, length) => {
      const result = results.at(-1)
      if (!result) return
      const start = offset - 5
      if (bytes.buffer !== answer.buffer || (result.end !== 0 && result.end !== start))
        throw new Error('a result whose rows are not one view of the answer')
      if (result.end === 0) result.start = start
      result.end = offset - 4 + length
    },
  }))
  // One call with the whole answer: the messages are views of it.
  parser.parse(answer, (message) => {
    if (message.name === 'parseComplete') parsed = true
    else if (message.name === 'error') error ??= message
  })
  named(parsed)
  if (error) throw error
  return results.map(({ fields, start, end }) => ({ fields, rows: answer.subarray(start, end) }))
}

/** The organization the transaction's key lookup named ('' for none, which no row matches). */
const KEY_ORGANIZATION_TEXT = "SELECT coalesce(current_setting('openbook.org_id', true), '') AS org"

/**
 * `params` with `KEY_ORGANIZATION_PARAM` bound to the organization the transaction's key lookup
 * named, read from the setting it made (as the PostgreSQL store's one trip reads it): the
 * statement was sent with the lookup, before its answer was back.
 */
async function withKeyOrganization(params: readonly unknown[]): Promise<readonly unknown[]> {
  if (!params.some(isKeyOrganizationParam)) return params
  const [row] = (await preparedQuery(KEY_ORGANIZATION_TEXT, [])) as { org: string }[]
  return params.map((param) => (isKeyOrganizationParam(param) ? (row?.org ?? '') : param))
}

async function query(text: string, params: readonly unknown[]): Promise<unknown[]> {
  // Without parameters (the key lookup writes its hash into the statement): one simple-protocol
  // call with the owed statements, never a prepared statement per distinct text.
  if (params.length === 0) return (await simple(text)).at(-1)?.rows ?? []
  if (inTransaction().prepared && params.every(isTextParam)) return preparedQuery(text, params)
  await simple()
  return (await database().query(text, [...params])).rows
}

/**
 * Creates the database in DATA_DIR in a child process (embedded-create.ts), which has ended
 * before this thread opens it: PGlite's initdb needs hundreds of megabytes for a few seconds, which
 * in this process would stay resident for as long as it runs.
 */
async function createDatabase(): Promise<void> {
  // Running from source (tests, tsx), this file's URL ends in .ts and a query of tsx's.
  const fromSource = new URL(import.meta.url).pathname.endsWith('.ts')
  const script = fileURLToPath(
    new URL(fromSource ? './embedded-create.ts' : './embedded-create.js', import.meta.url),
  )
  const args = [
    ...EMBEDDED_V8_FLAGS.split(' '),
    // From source the child's TypeScript goes through tsx as well, found from the project's root.
    ...(fromSource ? ['--import', 'tsx'] : []),
    script,
    absolute(dataDir),
    JSON.stringify(options),
  ]
  const cwd = fromSource ? fileURLToPath(new URL('../../..', import.meta.url)) : undefined
  // Its standard input stays open while this process runs: it ends early when this one does.
  const child = spawn(process.execPath, args, { cwd, stdio: ['pipe', 'ignore', 'pipe'] })
  let stderr = ''
  child.stderr.setEncoding('utf8').on('data', (chunk: string) => {
    stderr = (stderr + chunk).slice(-4_000)
  })
  const code = await new Promise<number | null>((resolve, reject) => {
    child.once('error', reject)
    child.once('close', resolve)
  })
  if (code !== 0) {
    const lines = stderr.trim().split('\n')
    const reason = lines.filter((line) => /error/i.test(line)).at(-1) ?? lines.at(-1) ?? `exit ${code}`
    throw new Error(`creating the embedded database in ${dataDir} failed: ${reason}`)
  }
}

/**
 * A DATA_DIR without PG_VERSION is new, or was left half-made: it is copied from the template
 * when there is a sound one of this code, and created by PGlite's initdb otherwise.
 */
async function makeDataDir(): Promise<DataDirOrigin> {
  if (dataDir.startsWith('memory://') || existsSync(join(dataDir, MARKER))) return { made: 'no' }
  const copy = template === false ? undefined : copyTemplate(template, absolute(dataDir))
  if (copy?.copied) return { made: 'template' }
  await createDatabase()
  return { made: 'initdb', ...(copy ? { templateUnused: copy.why } : {}) }
}

/**
 * `run`, and then, if the statement `ends` its transaction, the transaction's end: a read-only
 * transaction's COMMIT is owed to the next call, whether the statement ran or failed (COMMIT of a
 * transaction an error aborted rolls it back, which for a read-only one is the same).
 */
async function ending<T>(ends: boolean | undefined, run: () => Promise<T>): Promise<T> {
  if (!ends) {
    checkNotGivenUp()
    return run()
  }
  if (!inTransaction().readOnly) throw new Error('only a read-only transaction ends with a statement')
  try {
    checkNotGivenUp()
    return await run()
  } finally {
    await end(true)
  }
}

async function handle(request: DatabaseRequest): Promise<unknown> {
  switch (request.op) {
    case 'open': {
      const origin = await makeDataDir()
      const compiled = await pgliteWasm.catch(() => undefined)
      db = await PGlite.create(dataDir, compiled ? { ...options, pgliteWasmModule: compiled } : options)
      return origin
    }
    case 'begin':
      return begin(request)
    case 'query':
      return ending(request.ends, async () => query(request.text, await withKeyOrganization(request.params)))
    case 'queryBytes':
      return ending(request.ends, async () =>
        queryBytes(request.text, await withKeyOrganization(request.params)),
      )
    case 'exec':
      checkNotGivenUp()
      await simple(request.text)
      return undefined
    case 'copy':
      inTransaction()
      await simple()
      await database().query(copyStatement(request.table, request.columns, "'/dev/blob'"), [], {
        blob: new Blob([request.text]),
      })
      return undefined
    case 'end':
      return end(request.commit)
    case 'maintain':
      // VACUUM and CHECKPOINT refuse to run in a transaction: alone in their own query message.
      if (open) throw new Error('a transaction is open')
      // A read-only transaction's COMMIT may still be owed: it goes first, in a message of its own.
      await simple()
      await simple(request.text)
      return undefined
    case 'close':
      if (db) {
        await simple()
        await db.close()
      }
      db = undefined
      return undefined
  }
}

let queue: Promise<void> = Promise.resolve()

port.on('message', ({ id, request, spare }: DatabaseMessage) => {
  for (const memory of spare ?? []) if (spares.length < SPARES_KEPT) spares.push(memory)
  queue = queue.then(async () => {
    let response: DatabaseResponse
    try {
      response = { id, ok: true, value: await handle(request) }
    } catch (error) {
      response = { id, ok: false, error: serializeError(error) }
    }
    // A page's answer is handed over, not copied: the rows' memory is the other thread's now.
    port.postMessage(
      response,
      request.op === 'queryBytes' && response.ok ? answersMemory(response.value) : [],
    )
  })
})

/** The memory `queryBytes`'s results are views of: one ArrayBuffer of the answer's size, the thread's own. */
function answersMemory(results: unknown): ArrayBuffer[] {
  const memory = new Set<ArrayBuffer>()
  for (const { rows } of results as ResultBytes[]) memory.add(rows.buffer as ArrayBuffer)
  return [...memory]
}
