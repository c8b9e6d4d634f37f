import { createHash } from 'node:crypto'
import { pipeline } from 'node:stream/promises'
import type pg from 'pg'
import { from as copyFrom } from 'pg-copy-streams'
import type { PreparedStatements } from '../../config.js'
import { techniques } from '../../techniques.js'
import { copyStatement } from '../copy.js'
import {
  executeText,
  inlineText,
  namesKeyOrganization,
  prepareOnServerText,
  prepareText,
} from '../one-trip.js'
import type { AdminSql, RowSink } from '../types.js'
import { rowTap } from './row-tap.js'

/**
 * One transaction on one pooled PostgreSQL connection, and the `Sql` it hands the work: on the
 * request path, BEGIN, the settings, the key lookup and the page in one round trip (one-trip.ts).
 */

/**
 * How a transaction talks to the server.
 * - `request`: the request path. BEGIN and its settings travel with the first statement when it
 *   has no parameters (the key lookup), statements with parameters are prepared once per
 *   connection (`preparedStatements` on), and a read-only transaction's COMMIT is not waited for:
 *   two round trips per request instead of four. With prepared statements (on or pooler), the key
 *   lookup waits for the page and both go with the settings in one message (`one-trip.ts`), which
 *   is the read-only transaction itself: one round trip, no BEGIN and no COMMIT (`sendMessage`).
 * - anything else: BEGIN, then the statements as they come, then COMMIT, each waited for.
 */
export interface TransactionMode {
  readonly preamble: string
  readonly request: boolean
  readonly readOnly: boolean
  /** A read whose work is one message (`ReadOptions.oneMessage`): it may share its connection. */
  readonly oneMessage?: boolean
}

export const OPERATOR: TransactionMode = { preamble: '', request: false, readOnly: false }

export type Transaction = <T>(mode: TransactionMode, work: (sql: AdminSql) => Promise<T>) => Promise<T>

export interface Database {
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
/**
 * Per shared connection, the statements a message sent on it PREPAREs whose answer has not come
 * back: a message sent behind it EXECUTEs them without a PREPARE of its own, which would fail
 * (42P05) once the first has run.
 */
const preparingBySql = new WeakMap<pg.PoolClient, Set<string>>()
/** The names `byClient` keeps for `client`, a set made on first use. */
function namesOf(byClient: WeakMap<pg.PoolClient, Set<string>>, client: pg.PoolClient): Set<string> {
  let names = byClient.get(client)
  if (!names) {
    names = new Set()
    byClient.set(client, names)
  }
  return names
}
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
export class RoundTripTimeout extends Error {
  readonly code = '08006'
  constructor() {
    super('the database did not answer in time')
  }
}

/**
 * `work`, or a timeout error after `ms`; what `work` yields after that goes to `abandon`. The
 * deadline is judged after the input that came before it: an event loop held up past the deadline
 * (a crowd of requests on a busy machine) runs its timers before it reads its sockets, and would
 * otherwise call an answer that arrived in time a database that did not answer. So the timer only
 * asks, and the check after the loop's next read of its sockets (`setImmediate`) decides.
 */
export function within<T>(work: Promise<T>, ms: number, abandon: (value: T) => void): Promise<T> {
  let timer: NodeJS.Timeout | undefined
  let late = false
  let settled = false
  const timeout = new Promise<never>((_, reject) => {
    timer = setTimeout(
      () =>
        setImmediate(() => {
          if (settled) return
          late = true
          reject(new RoundTripTimeout())
        }),
      Math.max(1, ms),
    )
  })
  work.then(
    (value) => {
      settled = true
      if (late) abandon(value)
    },
    () => {
      settled = true
    },
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
export class TransactionConnection {
  /** BEGIN not sent yet: it goes with the first statement (request path) or before the work. */
  owed: string | undefined
  /** The statements of `owed` after its BEGIN. */
  private owedSettings: string[] = []
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

  /**
   * A read-only request on the one-trip path: a message that carries the opening and the page is
   * its own transaction, with no BEGIN or COMMIT (`sendMessage`).
   */
  private readonly implicit: boolean
  /**
   * It EXECUTEd a statement that a message sent before it on the shared connection PREPAREs: if
   * that message failed first, its "prepared statement does not exist" is that failure's, not a
   * pooler's.
   */
  reliedOnAnother = false

  constructor(
    private readonly client: pg.PoolClient,
    private readonly mode: TransactionMode,
    private readonly prepare: PreparedStatements,
    /** `pooler`: the server connection's prepared statements checked in pg_prepared_statements. */
    private readonly recheck: boolean,
    private readonly onAnswer: () => void,
    /** The request path: how long a round trip may still take (its deadline, or the replica's cap). */
    private readonly roundTripLimitMs?: () => number,
    /**
     * The connection carries other requests' messages, sent before and after this one's without
     * waiting for their answers (pipeline.ts): every message of this transaction is one of its
     * own, without BEGIN, its settings with it, and the rows a sink takes go with the message.
     */
    private readonly shared = false,
  ) {
    this.implicit = mode.request && mode.readOnly && prepare !== 'off'
    if (shared && !(this.implicit && prepare === 'on'))
      throw new Error('a shared connection carries one-trip reads only')
    this.owe()
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
      ...(rowTap?.tapped(client)
        ? {
            queryInto: async (sink, text, params) => {
              if (shared) await this.execute(text, params ?? [], sink)
              else await rowTap?.into(client, sink, () => query(text, params))
            },
          }
        : {}),
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
    const sent = this.preparing.slice()
    if (this.shared) for (const name of sent) this.preparingHere().add(name)
    try {
      result = await (this.roundTripLimitMs ? this.bounded(send(), this.roundTripLimitMs()) : send())
    } catch (error) {
      if (this.preparing.length > 0) this.broken = true
      throw error
    } finally {
      if (this.shared) for (const name of sent) this.preparingHere().delete(name)
    }
    const prepared = this.preparedHere()
    for (const name of this.preparing.splice(0)) prepared.add(name)
    this.answered = true
    this.onAnswer()
    return result
  }

  /** The statements a message in flight on this shared connection PREPAREs. */
  private preparingHere(): Set<string> {
    return namesOf(preparingBySql, this.client)
  }

  /** The statements this connection has PREPAREd (`on`). */
  private preparedHere(): Set<string> {
    return namesOf(preparedBySql, this.client)
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
    if (this.shared && this.preparingHere().has(name)) {
      this.reliedOnAnother = true
      return [execute]
    }
    this.preparing.push(name)
    return [prepareText(name, text), execute]
  }

  /**
   * Owes BEGIN and the settings after it, as `owed` and, for a message without BEGIN
   * (`implicit`), `owedSettings`: on the request path `on`, the settings EXECUTEd (`executeOnce`).
   */
  private owe(): void {
    const { preamble, request } = this.mode
    // On a shared connection whether the settings need their PREPARE is known only as the
    // message goes (`sendMessage`): another request's message may have gone in between.
    this.owedSettings = this.shared
      ? []
      : !preamble
        ? []
        : request && this.prepare === 'on'
          ? this.executeOnce(preamble, [])
          : [preamble]
    this.owed = ['BEGIN', ...this.owedSettings].join('; ')
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
   *
   * `implicit`: a message that opens the transaction and ends with the page goes without BEGIN.
   * PostgreSQL runs the statements of one simple-protocol message as one transaction of their
   * own (an implicit transaction block: the settings' `set_config(…, true)` hold until its end, as
   * in a transaction begun by BEGIN), and commits it when the message is done: no BEGIN to parse
   * and no COMMIT to send (bench/RESULTS.md: 4-10 % of PostgreSQL's CPU a request). Each statement
   * reads its own snapshot either way (READ COMMITTED); the page and its total are one statement.
   * A statement after it opens a transaction again, with its settings.
   */
  private async sendMessage(
    statements: readonly string[],
    last: string | undefined,
    sink?: RowSink,
  ): Promise<object[]> {
    const held = this.held
    this.held = []
    // A shared connection's every message is a transaction of its own: it opens with the settings.
    const settings =
      this.shared && this.mode.preamble ? this.executeOnce(this.mode.preamble, []) : this.owedSettings
    const heldParts = held.map((h) => this.heldText(h))
    const heldCount = heldParts.reduce((sum, part) => sum + part.length, 0)
    const implicit = this.implicit && this.owed !== undefined && (last !== undefined || this.shared)
    const opening = this.owed === undefined ? [] : implicit ? settings : [this.owed]
    const texts = [...opening, ...statements, ...heldParts.flat()]
    if (last !== undefined) texts.push(last)
    this.owed = undefined
    // Whatever its answer, no transaction is open after the message: the next statement opens one.
    const reopen = () => {
      if (implicit) this.owe()
    }
    try {
      const text = texts.join('; ')
      const answer = await this.roundTrip(
        (): Promise<pg.QueryResult | pg.QueryResult[]> =>
          sink && rowTap
            ? rowTap.sendInto(this.client, sink, text)
            : (this.client.query(text) as unknown as Promise<pg.QueryResult | pg.QueryResult[]>),
      )
      const results = Array.isArray(answer) ? answer : [answer]
      // Each held statement's answer is the last of its texts; PREPAREs come before their EXECUTE.
      const heldFrom = results.length - heldCount - (last === undefined ? 0 : 1)
      let at = heldFrom
      for (const [i, h] of held.entries()) {
        at += heldParts[i]?.length ?? 1
        h.resolve(results[at - 1]?.rows ?? [])
      }
      reopen()
      return last === undefined ? [] : (results.at(-1)?.rows ?? [])
    } catch (error) {
      if (statements.length > 0 && this.prepare === 'on') this.broken = true
      for (const h of held) h.reject(error)
      reopen()
      throw error
    }
  }

  /**
   * A prepared statement run by `EXECUTE` in one message with what is owed and held, `PREPARE`d
   * first if new: on, if this connection has not; pooler, if the server connection has not, which
   * the database checks in the same message.
   */
  private async execute<Row extends object>(
    text: string,
    params: readonly unknown[],
    sink?: RowSink,
  ): Promise<Row[]> {
    const name = statementName(text, 'execute')
    if (this.prepare === 'pooler') {
      const rows = await this.sendMessage(
        [prepareOnServerText(name, text, this.recheck)],
        executeText(name, params),
        sink,
      )
      return rows as Row[]
    }
    const texts = this.executeOnce(text, params)
    const execute = texts.pop()
    return (await this.sendMessage(texts, execute, sink)) as Row[]
  }

  private async query<Row extends object>(text: string, params: readonly unknown[] = []): Promise<Row[]> {
    const { client, mode } = this
    // Every statement on a shared connection goes in a message of its own, with the settings:
    // one with parameters as EXECUTE, one without as it is (never prepared: its text may name
    // values).
    if (this.shared)
      return params.length > 0
        ? this.execute<Row>(text, params)
        : ((await this.sendMessage([], text)) as Row[])
    // With one trip switched off (techniques.ts), the page may still go by SQL-level EXECUTE.
    const sqlExecute = !techniques.oneTrip && techniques.sqlExecute && params.length > 0
    if (namesKeyOrganization(params) || (sqlExecute && mode.request && this.prepare !== 'off')) {
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
