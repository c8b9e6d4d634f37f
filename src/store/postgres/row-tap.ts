import pg from 'pg'
import { rowParser, rowParserWorks } from '../row-parser.js'
import type { RowSink } from '../types.js'

/**
 * A pg client that can hand one result's rows to a `RowSink` as the bytes of their DataRow
 * messages, instead of making a string of every field and an object of every row: the page's
 * items are written from those bytes (queries/page-bytes.ts). Its connection reads PostgreSQL's
 * messages with pg's own parser (row-parser.ts); every message the sink does not take goes to pg
 * as it would have.
 */

interface Connection {
  _emitMessage: boolean
  emit(event: string, message: unknown): boolean
  attachListeners(stream: NodeJS.ReadableStream): void
}

class TappedClient extends pg.Client {
  /** Where the rows of the result it accepts go, while a statement that reads one runs. */
  private sink: RowSink | undefined

  constructor(config?: string | pg.ClientConfig) {
    super(config)
    const connection = (this as unknown as { connection: Connection }).connection
    // As pg's Connection#attachListeners, with the row parser.
    connection.attachListeners = (stream) => {
      // A query sent with its own sink (`sendInto`) takes its rows while it is the one answered.
      const parser = rowParser(
        () =>
          (this as unknown as { _activeQuery?: { rowSink?: RowSink } })._activeQuery?.rowSink ?? this.sink,
      )
      stream.on('data', (buffer: Buffer) =>
        parser.parse(buffer, (message) => {
          if (connection._emitMessage) connection.emit('message', message)
          connection.emit(message.name === 'error' ? 'errorMessage' : message.name, message)
        }),
      )
    }
  }

  /**
   * Sends `text` (simple protocol), the rows of the result `sink` accepts going to it: the sink
   * goes with the query, so queries sent behind one another on a pipelined client each keep theirs.
   */
  sendInto(sink: RowSink, text: string): Promise<pg.QueryResult | pg.QueryResult[]> {
    const query = new pg.Query(text) as pg.Query & { rowSink?: RowSink }
    query.rowSink = sink
    return new Promise((resolve, reject) => {
      ;(query as unknown as { callback: (error: Error | null, result: pg.QueryResult) => void }).callback = (
        error,
        result,
      ) => (error ? reject(error) : resolve(result))
      this.query(query)
    })
  }

  /** Runs `query` with `sink` taking the rows of the result it accepts. */
  async into<T>(sink: RowSink, query: () => Promise<T>): Promise<T> {
    this.sink = sink
    try {
      return await query()
    } finally {
      this.sink = undefined
    }
  }
}

/** The pool's client class, and the way to run a statement into a sink on one of its clients. */
export const rowTap = rowParserWorks
  ? {
      Client: TappedClient,
      tapped: (client: pg.PoolClient) => client instanceof TappedClient,
      into: <T>(client: pg.PoolClient, sink: RowSink, query: () => Promise<T>) =>
        (client as unknown as TappedClient).into(sink, query),
      sendInto: (client: pg.PoolClient, sink: RowSink, text: string) =>
        (client as unknown as TappedClient).sendInto(sink, text),
    }
  : undefined
