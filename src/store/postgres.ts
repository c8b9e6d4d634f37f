import { createHash } from 'node:crypto'
import { pipeline } from 'node:stream/promises'
import { setTimeout as sleep } from 'node:timers/promises'
import pg from 'pg'
import { from as copyFrom } from 'pg-copy-streams'
import type { PreparedStatements } from '../config.js'
import { copyStatement } from './copy.js'
import {
  executeText,
  inlineText,
  isPoolerSymptom,
  isPreparedStatementMissing,
  namesKeyOrganization,
  prepareOnServerText,
  prepareText,
} from './one-trip.js'
import { readerPreamble } from './reader-settings.js'
import type { AdminSql, Store, StoreAdapter } from './types.js'

export interface PostgresStoreOptions {
  readonly connectionString: string
  /** A streaming replica for the request path's reads (DATABASE_READ_URL); writes stay on the primary. */
  readonly readConnectionString?: string
  /** Reads fall back to the primary while the replica is further behind than this. */
  readonly maxReplicaLagMs?: number
  readonly maxConnections?: number
  /**
   * How the request path's statements are prepared (config.ts, `PREPARED_STATEMENTS`): `on` (the
   * default) once per connection, the page by SQL-level PREPARE (one-trip.ts); `pooler` once per
   * server connection, checked by the database, for PgBouncer in transaction mode of any version
   * (1.21's tracking is protocol-level only); `off`, never.
   */
  readonly preparedStatements?: PreparedStatements
  /**
   * Told once when prepared statements `on` met a pooler in transaction mode (isPoolerSymptom):
   * the store has switched to `pooler` and run the request again.
   */
  readonly onPoolerDetected?: (detail: string) => void
  /**
   * How long a request may wait out a store that cannot be reached (a pooler or a server
   * restarting): connections are tried again, and a read-only request whose connection was lost
   * is run again, until then; then 503 with Retry-After.
   */
  readonly requestDeadlineMs?: number
  readonly statementTimeoutMs?: number
  /** Called for errors of idle pooled connections (a restarted server, a terminated backend). */
  readonly onIdleError?: (error: Error) => void
  /** Told when reads move off the replica or back to it, and of each read sent to the primary instead. */
  readonly replicaEvents?: ReplicaEvents
}

export type ReplicaState = 'ok' | 'down' | 'behind'

export interface ReplicaEvents {
  stateChanged(state: ReplicaState, detail: string): void
  fellBack(reason: Exclude<ReplicaState, 'ok'>): void
}

/** SQLSTATEs of a session the server ended: admin_shutdown, crash_shutdown, cannot_connect_now. */
const SESSION_ENDED = new Set(['57P01', '57P02', '57P03'])
/** Socket errors of a connection that is gone. */
const SOCKET_GONE = new Set(['ECONNRESET', 'EPIPE', 'ETIMEDOUT'])

/**
 * Whether an error says the connection is gone (the server ended the session, the socket closed)
 * rather than that the statement failed: node-postgres gives the server's FATAL (57P01 for
 * pg_terminate_backend), the socket's error, or one of its own messages for a closed connection.
 */
export function isConnectionLost(error: unknown): boolean {
  if (!(error instanceof Error)) return false
  const code = (error as { code?: unknown }).code
  if (
    typeof code === 'string' &&
    (SESSION_ENDED.has(code) || SOCKET_GONE.has(code) || code.startsWith('08'))
  ) {
    return true
  }
  return (
    error.message.startsWith('Connection terminated') ||
    error.message === 'Client has encountered a connection error and is not queryable'
  )
}

/**
 * How a transaction talks to the server.
 * - `request`: the request path. BEGIN and its settings travel with the first statement when it
 *   has no parameters (the key lookup), statements with parameters are prepared once per
 *   connection (`preparedStatements` on), and a read-only transaction's COMMIT is not waited for:
 *   two round trips per request instead of four. With prepared statements (on or pooler), the key
 *   lookup waits for the page and both go with BEGIN in one message (`one-trip.ts`): one round
 *   trip, and COMMIT.
 * - anything else: BEGIN, then the statements as they come, then COMMIT, each waited for.
 */
export interface TransactionMode {
  readonly preamble: string
  readonly request: boolean
  readonly readOnly: boolean
}

const OPERATOR: TransactionMode = { preamble: '', request: false, readOnly: false }

type Transaction = <T>(mode: TransactionMode, work: (sql: AdminSql) => Promise<T>) => Promise<T>

interface Database {
  readonly pool: pg.Pool
  readonly transaction: Transaction
}

/**
 * Statement names by kind and text. Keyed by the text itself, which the query modules build once
 * per shape and hand on as the same string: its hash is kept with it, so a lookup does not read
 * the 3-6 KB again (a key made per call, such as a prefixed copy, cost 5-8 µs a request).
 */
const statementNames = { protocol: new Map<string, string>(), execute: new Map<string, string>() }
/** Per connection, the statements it has prepared by `PREPARE` (`one-trip.ts`), by name. */
const preparedBySql = new WeakMap<pg.PoolClient, Set<string>>()
export const REQUEST_DEADLINE_MS = 8_000
/**
 * A round trip to the replica that takes longer ends there and the read moves to the primary: a
 * page takes milliseconds, and a replica that stopped leaves its reads queued in the pooler.
 */
const REPLICA_ROUND_TRIP_CAP_MS = 2_000

/** On PostgreSQL the database is the busier side: pages come back as rows, Node writes the JSON. */
const POSTGRES_ADAPTER: StoreAdapter = { pageForm: 'rows' }

/**
 * A prepared statement's name, the same for the same text in every connection and process.
 * Statements prepared by `PREPARE` are named apart (`e`) from those the extended protocol
 * prepares: a connection may hold the same text both ways.
 */
function statementName(text: string, kind: keyof typeof statementNames = 'protocol'): string {
  const names = statementNames[kind]
  let name = names.get(text)
  if (!name) {
    const hash = createHash('sha256').update(text).digest('hex').slice(0, 24)
    name = kind === 'protocol' ? `openbook_${hash}` : `openbook_e_${hash}`
    names.set(text, name)
  }
  return name
}

/** A round trip cut off by its deadline: a lost connection (08006), but not a stale idle one to retry at once. */
class RoundTripTimeout extends Error {
  readonly code = '08006'
  constructor() {
    super('the database did not answer in time')
  }
}

/** `work`, or a timeout error after `ms`; what `work` yields after that goes to `abandon`. */
function within<T>(work: Promise<T>, ms: number, abandon: (value: T) => void): Promise<T> {
  let timer: NodeJS.Timeout | undefined
  let late = false
  const timeout = new Promise<never>((_, reject) => {
    timer = setTimeout(
      () => {
        late = true
        reject(new RoundTripTimeout())
      },
      Math.max(1, ms),
    )
  })
  work.then(
    (value) => {
      if (late) abandon(value)
    },
    () => undefined,
  )
  return Promise.race([work, timeout]).finally(() => clearTimeout(timer))
}

/** A statement held by `sendWithNext`, answered with the message it goes in. */
interface Held {
  readonly text: string
  readonly params: readonly unknown[]
  resolve(rows: object[]): void
  reject(error: unknown): void
}

/**
 * One transaction's use of a pooled connection: BEGIN is owed until it goes (with the first
 * statement on the request path), and whether any round trip has come back, after which the
 * transaction can no longer move to another connection.
 */
class TransactionConnection {
  /** BEGIN not sent yet: it goes with the first statement (request path) or before the work. */
  owed: string | undefined
  answered = false
  /** Not to be given to the next user: its backend died, or it could not roll back. */
  broken = false
  readonly sql: AdminSql

  /** Statements waiting to go with the next one (`Sql.sendWithNext`). */
  private held: Held[] = []
  /**
   * `on`: statements the next round trip PREPAREs on this connection, known to be there once it
   * has come back. A round trip that fails leaves it unknown, and the connection is not given out again.
   */
  private preparing: string[] = []

  constructor(
    private readonly client: pg.PoolClient,
    private readonly mode: TransactionMode,
    begin: string,
    private readonly prepare: PreparedStatements,
    /** `pooler`: the server connection's prepared statements checked in pg_prepared_statements. */
    private readonly recheck: boolean,
    private readonly onAnswer: () => void,
    /** The request path: how long a round trip may still take (its deadline, or the replica's cap). */
    private readonly roundTripLimitMs?: () => number,
  ) {
    this.owed =
      mode.request && prepare === 'on' && mode.preamble ? this.preparedOpening(mode.preamble) : begin
    const query = this.query.bind(this)
    const oneTrip = mode.request && prepare !== 'off'
    this.sql = {
      query,
      exec: async (text) => {
        await query(text)
      },
      copyIn: async (table, columns, text) => {
        if (this.owed !== undefined) await query('SELECT 1')
        await pipeline([text], client.query(copyFrom(copyStatement(table, columns, 'STDIN'))))
      },
      ...(oneTrip
        ? {
            sendWithNext: <Row extends object>(text: string, params: readonly unknown[] = []) =>
              new Promise<Row[]>((resolve, reject) => {
                this.held.push({ text, params, resolve: resolve as (rows: object[]) => void, reject })
                // A statement nobody sends after it still goes, alone, once this turn of the
                // event loop is over: a caller that awaits it first is not left waiting.
                if (this.held.length === 1) setImmediate(() => this.flush().catch(() => undefined))
              }),
            flush: () => this.flush(),
          }
        : {}),
    }
  }

  /** Sends the held statements, with BEGIN if it is owed, in one message. */
  async flush(): Promise<void> {
    if (this.held.length === 0) return
    await this.sendMessage([], undefined)
  }

  /** Sends the owed BEGIN on its own. */
  async sendOwed(): Promise<void> {
    const opening = this.owed
    this.owed = undefined
    if (opening !== undefined) await this.roundTrip(() => this.client.query(opening))
  }

  private async roundTrip<R>(send: () => Promise<R>): Promise<R> {
    let result: R
    try {
      result = await (this.roundTripLimitMs ? this.bounded(send(), this.roundTripLimitMs()) : send())
    } catch (error) {
      if (this.preparing.length > 0) this.broken = true
      throw error
    }
    const prepared = this.preparedHere()
    for (const name of this.preparing.splice(0)) prepared.add(name)
    this.answered = true
    this.onAnswer()
    return result
  }

  /** The statements this connection has PREPAREd (`on`). */
  private preparedHere(): Set<string> {
    let prepared = preparedBySql.get(this.client)
    if (!prepared) {
      prepared = new Set()
      preparedBySql.set(this.client, prepared)
    }
    return prepared
  }

  /**
   * `on`: `text` as `EXECUTE` of a statement prepared once per connection, with its `PREPARE`
   * before it where this connection has not prepared it: PostgreSQL then neither parses nor plans
   * it again. For the settings and the key lookup, 100-200 µs of the database's CPU a request
   * (bench/RESULTS.md, the yardstick).
   */
  private executeOnce(text: string, params: readonly unknown[]): string[] {
    const name = statementName(text, 'execute')
    const execute = executeText(name, params)
    if (this.preparedHere().has(name) || this.preparing.includes(name)) return [execute]
    this.preparing.push(name)
    return [prepareText(name, text), execute]
  }

  /** BEGIN and the settings, `on`: the settings EXECUTEd (`executeOnce`). */
  private preparedOpening(preamble: string): string {
    return ['BEGIN', ...this.executeOnce(preamble, [])].join('; ')
  }

  /** A held statement as it goes: `on`, EXECUTEd; `pooler`, with its parameters written in. */
  private heldText(held: Held): string[] {
    if (held.params.length === 0) return [held.text]
    return this.prepare === 'on'
      ? this.executeOnce(held.text, held.params)
      : [inlineText(held.text, held.params)]
  }

  /**
   * A round trip that has not come back within `ms` (a pooler holding the request while its server
   * restarts: PgBouncer waits up to query_wait_timeout) ends the connection: its socket is closed,
   * so the request fails as a lost connection does, and is run again or moved while time is left.
   */
  private async bounded<R>(work: Promise<R>, ms: number): Promise<R> {
    try {
      return await within(work, ms, () => undefined)
    } catch (error) {
      if (error instanceof RoundTripTimeout) {
        this.broken = true
        ;(
          this.client as unknown as { connection?: { stream?: { destroy(): void } } }
        ).connection?.stream?.destroy()
      }
      throw error
    }
  }

  /**
   * One simple-protocol message: the owed BEGIN, `statements`, the held statements, then `last`;
   * each held statement is answered with its result, and the answer is `last`'s rows. A message
   * that fails after a `PREPARE` leaves it unknown whether the statement exists: with prepared
   * statements `on`, which remembers them per connection, the connection is not given out again.
   */
  private async sendMessage(statements: readonly string[], last: string | undefined): Promise<object[]> {
    const held = this.held
    this.held = []
    const heldParts = held.map((h) => this.heldText(h))
    const heldCount = heldParts.reduce((sum, part) => sum + part.length, 0)
    const texts = [...(this.owed === undefined ? [] : [this.owed]), ...statements, ...heldParts.flat()]
    if (last !== undefined) texts.push(last)
    this.owed = undefined
    try {
      const answer = await this.roundTrip(
        () => this.client.query(texts.join('; ')) as unknown as Promise<pg.QueryResult | pg.QueryResult[]>,
      )
      const results = Array.isArray(answer) ? answer : [answer]
      // Each held statement's answer is the last of its texts; PREPAREs come before their EXECUTE.
      const heldFrom = results.length - heldCount - (last === undefined ? 0 : 1)
      let at = heldFrom
      for (const [i, h] of held.entries()) {
        at += heldParts[i]?.length ?? 1
        h.resolve(results[at - 1]?.rows ?? [])
      }
      return last === undefined ? [] : (results.at(-1)?.rows ?? [])
    } catch (error) {
      if (statements.length > 0 && this.prepare === 'on') this.broken = true
      for (const h of held) h.reject(error)
      throw error
    }
  }

  /**
   * A prepared statement run by `EXECUTE` in one message with what is owed and held, `PREPARE`d
   * first if new: on, if this connection has not; pooler, if the server connection has not, which
   * the database checks in the same message.
   */
  private async execute<Row extends object>(text: string, params: readonly unknown[]): Promise<Row[]> {
    const name = statementName(text, 'execute')
    if (this.prepare === 'pooler') {
      const rows = await this.sendMessage(
        [prepareOnServerText(name, text, this.recheck)],
        executeText(name, params),
      )
      return rows as Row[]
    }
    const texts = this.executeOnce(text, params)
    const execute = texts.pop()
    return (await this.sendMessage(texts, execute)) as Row[]
  }

  private async query<Row extends object>(text: string, params: readonly unknown[] = []): Promise<Row[]> {
    const { client, mode } = this
    if (namesKeyOrganization(params)) {
      if (!(mode.request && this.prepare !== 'off'))
        throw new Error('KEY_ORGANIZATION needs the one-trip request path')
      return this.execute<Row>(text, params)
    }
    if (this.held.length > 0) await this.flush()
    if (this.owed !== undefined) {
      if (mode.request && params.length === 0) {
        const opening = this.owed
        this.owed = undefined
        // One simple-protocol message: BEGIN, the settings and the statement; its answer is the last.
        const results = await this.roundTrip(
          () => client.query(`${opening}; ${text}`) as unknown as Promise<pg.QueryResult<Row>[]>,
        )
        return results.at(-1)?.rows ?? []
      }
      await this.sendOwed()
    }
    const config =
      mode.request && this.prepare === 'on' && params.length > 0
        ? { name: statementName(text), text, values: params as unknown[] }
        : { text, values: params as unknown[] }
    return (await this.roundTrip(() => client.query<Row>(config))).rows
  }
}

/**
 * How long a request may wait on one database: `deadlineMs` in all, each round trip at most
 * `roundTripCapMs`. The primary waits out a short outage (the request deadline); the replica gives
 * up at once and within a cap, as the primary can serve instead.
 */
interface Patience {
  /** How long refused and lost connections are tried again. */
  readonly retryForMs: number
  readonly roundTripCapMs: number
  /** The cap holds for every transaction (the replica's lag probe too), not only the request path's. */
  readonly capEveryTransaction: boolean
}

function openDatabase(connectionString: string, options: PostgresStoreOptions, patience: Patience): Database {
  const { retryForMs, roundTripCapMs, capEveryTransaction } = patience
  const maxConnections = options.maxConnections ?? 10
  // `on` becomes `pooler` for good at the first sign of a pooler in transaction mode.
  let prepare = options.preparedStatements ?? 'on'
  const pool = new pg.Pool({
    connectionString,
    max: maxConnections,
    connectionTimeoutMillis: 5_000,
    idleTimeoutMillis: 30_000,
  })
  // Without a listener an idle connection's error would crash the process.
  pool.on('error', (error) => options.onIdleError?.(error))
  /** Connections that have begun a transaction before: the ones that have sat idle in the pool. */
  const reused = new WeakSet<pg.PoolClient>()

  /**
   * A connection from the pool. A refused connection (a pooler or server restarting: PgBouncer is
   * gone for a second or more during a restart) is tried again until `deadline`, with backoff,
   * before the request is answered 503: nothing of the transaction has run yet.
   */
  async function connect(deadline: number, answerBy: number | undefined): Promise<pg.PoolClient> {
    for (let delay = 25; ; delay = Math.min(delay * 2, 250)) {
      try {
        // A connection that hangs (a peer that stopped answering) counts against the deadline too.
        return await (answerBy === undefined
          ? pool.connect()
          : within(pool.connect(), answerBy - Date.now(), (late) => late.release()))
      } catch (error) {
        if (error instanceof RoundTripTimeout) throw error
        const left = deadline - Date.now()
        if (!(isConnectRefused(error) || isConnectionLost(error)) || left <= 0) throw error
        // The last try at the deadline itself.
        await sleep(Math.min(delay, left))
      }
    }
  }

  async function transaction<T>(mode: TransactionMode, work: (sql: AdminSql) => Promise<T>): Promise<T> {
    const begin = mode.preamble ? `BEGIN; ${mode.preamble}` : 'BEGIN'
    // A backend that dies while its connection is idle (pg_terminate_backend, a restarted server)
    // is noticed by the pool only once its error has been read off the socket; until then the pool
    // still hands the connection out, and the round trip that carries BEGIN is the one that fails.
    // Nothing of the transaction has happened then (BEGIN, its settings and at most a read), so the
    // connection is discarded and the transaction starts again on another one. All the idle
    // connections may have died at once: after `maxConnections` discards the pool has none left and
    // opens a new one. A new connection that fails is not retried (the server is refusing
    // sessions), and nothing is retried once a round trip of the transaction has come back.
    // Behind a pooler, a server connection whose prepared statements were dropped while its session
    // setting still marks them prepared (a reset by DEALLOCATE ALL alone) answers "prepared statement
    // does not exist": the read-only request is run again once, its statements checked in
    // pg_prepared_statements (`recheck`).
    // A read-only request whose connection is lost after it was answered (a pooler or server
    // restarting under it) is run again on a new connection until the deadline: it wrote nothing.
    let recheck = false
    const deadline = Date.now() + retryForMs
    const answerBy = Date.now() + Math.max(retryForMs, roundTripCapMs)
    for (let attempt = 1; ; attempt++) {
      const attemptPrepare = prepare
      const capped = mode.request || capEveryTransaction
      const client = await connect(deadline, capped ? answerBy : undefined)
      const wasIdle = reused.has(client)
      const connection = new TransactionConnection(
        client,
        mode,
        begin,
        attemptPrepare,
        recheck,
        () => reused.add(client),
        capped ? () => Math.min(roundTripCapMs, answerBy - Date.now()) : undefined,
      )
      // A backend that dies while the connection is checked out emits 'error' on the client, which the
      // pool listens for only while it is idle: unheard, it would crash the process. The query in flight
      // rejects with the same error, so here the connection is only marked as not to be reused.
      const onCheckedOutError = () => {
        connection.broken = true
      }
      client.on('error', onCheckedOutError)
      let released = false
      try {
        if (!mode.request) await connection.sendOwed()
        const result = await work(connection.sql)
        await connection.flush()
        if (connection.owed === undefined) {
          if (mode.request && mode.readOnly) {
            // A read-only COMMIT changes nothing: the client's queue sends it before anything the
            // connection's next user asks, and a failure shows there (a dead connection is retried).
            client.query('COMMIT').catch(() => undefined)
            client.off('error', onCheckedOutError)
            client.release()
            released = true
          } else {
            await client.query('COMMIT')
          }
        }
        return result
      } catch (error) {
        if (
          !connection.answered &&
          wasIdle &&
          attempt <= maxConnections &&
          isConnectionLost(error) &&
          !(error instanceof RoundTripTimeout)
        ) {
          connection.broken = true
          continue
        }
        if (connection.owed === undefined) {
          try {
            await client.query('ROLLBACK')
          } catch {
            connection.broken = true
          }
        }
        if (
          attemptPrepare === 'pooler' &&
          mode.request &&
          mode.readOnly &&
          !recheck &&
          isPreparedStatementMissing(error)
        ) {
          recheck = true
          continue
        }
        // Judged by the form this attempt ran in: a request begun before another one switched the
        // process is run again too.
        if (attemptPrepare === 'on' && mode.request && mode.readOnly && isPoolerSymptom(error)) {
          connection.broken = true
          if (prepare === 'on') {
            prepare = 'pooler'
            options.onPoolerDetected?.((error as Error).message.split('\n')[0] ?? '')
          }
          continue
        }
        if (mode.request && mode.readOnly && isConnectionLost(error) && Date.now() + 100 < deadline) {
          connection.broken = true
          await sleep(100)
          continue
        }
        throw error
      } finally {
        if (!released) {
          // A connection that could not even roll back is not given to the next request.
          client.off('error', onCheckedOutError)
          client.release(connection.broken)
        }
      }
    }
  }
  return { pool, transaction }
}

const stats = (database: string, pool: pg.Pool) => ({
  database,
  total: pool.totalCount,
  idle: pool.idleCount,
  waiting: pool.waitingCount,
})

export function createPostgresStore(options: PostgresStoreOptions): Store {
  const timeout = options.statementTimeoutMs ?? 5_000
  const deadlineMs = options.requestDeadlineMs ?? REQUEST_DEADLINE_MS
  const primary = openDatabase(options.connectionString, options, {
    retryForMs: deadlineMs,
    roundTripCapMs: deadlineMs,
    capEveryTransaction: false,
  })
  const replica = options.readConnectionString
    ? openDatabase(options.readConnectionString, options, {
        retryForMs: 0,
        roundTripCapMs: Math.min(REPLICA_ROUND_TRIP_CAP_MS, deadlineMs),
        capEveryTransaction: true,
      })
    : undefined
  const monitor = replica
    ? new ReplicaMonitor(primary, replica, options.maxReplicaLagMs ?? 5_000, options.replicaEvents)
    : undefined
  const reading: TransactionMode = { preamble: readerPreamble(true, timeout), request: true, readOnly: true }
  const recording: TransactionMode = {
    preamble: readerPreamble(false, timeout),
    request: false,
    readOnly: false,
  }

  /**
   * The request path on the replica while it is up and close enough behind, else on the primary.
   * A read that cannot even begin on the replica (refused, gone) moves to the primary at once:
   * nothing of it has run, and the replica is marked down until the monitor sees it back.
   */
  async function read<T>(work: (sql: AdminSql) => Promise<T>): Promise<T> {
    if (!replica || !monitor) return primary.transaction(reading, work)
    const state = monitor.state
    if (state !== 'ok') {
      options.replicaEvents?.fellBack(state)
      return primary.transaction(reading, work)
    }
    // A read lost on the replica, even part-way, runs again on the primary: it wrote nothing.
    try {
      return await replica.transaction(reading, work)
    } catch (error) {
      if (!(isConnectionLost(error) || isConnectRefused(error))) throw error
      monitor.markDown(error)
      options.replicaEvents?.fellBack('down')
      return primary.transaction(reading, work)
    }
  }

  return {
    kind: 'postgres',
    adapter: POSTGRES_ADAPTER,
    concurrentReads: true,
    read,
    // Last-used writes, the CLI and migrations stay on the primary.
    asReader: (work) => primary.transaction(recording, work),
    admin: (work) => primary.transaction(OPERATOR, work),
    async maintain(statement) {
      await primary.pool.query(statement)
    },
    pools: () => [stats('primary', primary.pool), ...(replica ? [stats('replica', replica.pool)] : [])],
    ...(monitor ? { replicaLagSeconds: () => monitor.lagSeconds } : {}),
    async close() {
      monitor?.stop()
      await Promise.all([primary.pool.end(), replica?.pool.end()])
    },
  }
}

/** The database (or its pooler) cannot be reached just now: a refused or lost connection, a server starting or full. */
export function isStoreUnreachable(error: unknown): boolean {
  const code = (error as { code?: unknown }).code
  return isConnectRefused(error) || isConnectionLost(error) || code === '57P03' || code === '53300'
}

function isConnectRefused(error: unknown): boolean {
  const code = (error as { code?: unknown }).code
  return (
    code === 'ECONNREFUSED' ||
    code === 'ENOTFOUND' ||
    /timeout exceeded when trying to connect/.test((error as Error).message ?? '')
  )
}

/** A WAL position ('16/B374D848') as a number of bytes; exact up to 2^53 (8 PiB of WAL). */
function lsnBytes(lsn: string): number {
  const [high = '0', low = '0'] = lsn.split('/')
  return Number.parseInt(high, 16) * 2 ** 32 + Number.parseInt(low, 16)
}

const MONITOR_EVERY_MS = 1_000

/**
 * Watches how far the replica is behind: every second it notes the primary's WAL position and the
 * replica's replay position. The lag is the age of the oldest primary position the replica has
 * not replayed yet, so it is exact to the second whatever the replica's clock or the write rate.
 */
class ReplicaMonitor {
  state: ReplicaState = 'ok'
  lagSeconds: number | undefined = 0
  readonly #samples: { at: number; lsn: number }[] = []
  readonly #timer: NodeJS.Timeout
  #checking = false

  constructor(
    private readonly primary: Database,
    private readonly replica: Database,
    private readonly maxLagMs: number,
    private readonly events: ReplicaEvents | undefined,
  ) {
    this.#timer = setInterval(() => void this.check(), MONITOR_EVERY_MS)
    this.#timer.unref()
    void this.check()
  }

  markDown(error: unknown): void {
    this.#set('down', (error as Error).message?.split('\n')[0] ?? 'unreachable')
  }

  async check(): Promise<void> {
    if (this.#checking) return
    this.#checking = true
    try {
      const [current] = await this.primary.transaction(OPERATOR, (sql) =>
        sql.query<{ lsn: string }>('SELECT pg_current_wal_lsn()::text AS lsn'),
      )
      if (current) this.#samples.push({ at: Date.now(), lsn: lsnBytes(current.lsn) })
    } catch {
      // The primary's own trouble is not the replica's: keep the last state.
      this.#checking = false
      return
    }
    try {
      const probe: TransactionMode = {
        preamble: 'SET LOCAL statement_timeout = 2000',
        request: false,
        readOnly: true,
      }
      const [row] = await this.replica.transaction(probe, (sql) =>
        sql.query<{ replay: string | null }>('SELECT pg_last_wal_replay_lsn()::text AS replay'),
      )
      if (!row?.replay) throw new Error('not a streaming replica (no replay position)')
      const replayed = lsnBytes(row.replay)
      while (this.#samples.length > 1 && (this.#samples[0]?.lsn ?? 0) <= replayed) this.#samples.shift()
      const oldest = this.#samples[0]
      const lagMs = oldest && oldest.lsn > replayed ? Date.now() - oldest.at : 0
      this.lagSeconds = lagMs / 1000
      this.#set(lagMs > this.maxLagMs ? 'behind' : 'ok', `${this.lagSeconds.toFixed(1)} s behind`)
    } catch (error) {
      this.lagSeconds = undefined
      this.markDown(error)
    } finally {
      // Bounded: one sample a second, dropped once replayed.
      if (this.#samples.length > 3_600) this.#samples.splice(0, this.#samples.length - 3_600)
      this.#checking = false
    }
  }

  stop(): void {
    clearInterval(this.#timer)
  }

  #set(state: ReplicaState, detail: string): void {
    if (state === this.state) return
    this.state = state
    this.events?.stateChanged(state, detail)
  }
}
