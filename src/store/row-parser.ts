import { createRequire } from 'node:module'
import type { RowSink } from './types.js'

/**
 * PostgreSQL's backend messages split as pg splits them, with the DataRow messages of the results
 * a `RowSink` accepts handed to it as bytes instead: pg's own parser (pg-protocol's `Parser`, the
 * copy pg loads), with the method each message goes through wrapped. Both stores read a page's
 * rows through it (store/postgres/row-tap.ts, embedded/embedded-worker.ts).
 *
 * pg-protocol exports its parser (`pg-protocol/dist/parser`) but not that method
 * (`handlePacket`): where a release of it has no such method, `rowParserWorks` is false, the
 * stores read rows as their drivers make them, and `test/store/row-tap.test.ts` fails.
 */

/** A backend message as pg-protocol's parser makes it. */
export interface BackendMessage {
  readonly name: string
  readonly fields?: readonly { readonly name: string; readonly dataTypeID: number }[]
}

type HandlePacket = (offset: number, code: number, length: number, bytes: Buffer) => BackendMessage

interface ProtocolParser {
  handlePacket: HandlePacket
  parse(buffer: Buffer, callback: (message: BackendMessage) => void): void
}

const fromPg = createRequire(createRequire(import.meta.url).resolve('pg'))
const { Parser } = fromPg('pg-protocol/dist/parser') as { Parser: new () => ProtocolParser }

export const rowParserWorks = typeof (Parser.prototype as Partial<ProtocolParser>).handlePacket === 'function'

const ROW_DESCRIPTION = 0x54
const DATA_ROW = 0x44
/** The messages that end a result: CommandComplete, ErrorResponse, ReadyForQuery, EmptyQuery, PortalSuspended. */
const RESULT_ENDS = new Set([0x43, 0x45, 0x5a, 0x49, 0x73])

/** Stands for a DataRow message a sink took: the parser's callback never sees it. */
const TAKEN: BackendMessage = { name: 'dataRow taken' }

/**
 * What the driver is told of a result a sink takes: a RowDescription without columns. It makes
 * no row of it, so it need not prepare one per column (a type parser each and a template object
 * of every column's name; docs/design/techniques.md).
 */
const TAKEN_DESCRIPTION = Object.freeze({ name: 'rowDescription', length: 6, fieldCount: 0, fields: [] })

/**
 * A parser of one connection's messages whose DataRow messages go to the sink `sink()` names
 * (when a result begins) while a result it accepted is read; every other message to `parse`'s
 * callback.
 */
export function rowParser(sink: () => RowSink | undefined): Pick<ProtocolParser, 'parse'> {
  const parser = new Parser()
  const handle = parser.handlePacket.bind(parser)
  let taking: RowSink | undefined
  parser.handlePacket = (offset, code, length, bytes) => {
    if (code === DATA_ROW && taking) {
      taking.row(bytes, offset, length)
      return TAKEN
    }
    const message = handle(offset, code, length, bytes)
    if (code === ROW_DESCRIPTION) {
      const current = sink()
      taking = current?.accepts(message.fields ?? []) ? current : undefined
      if (taking) return TAKEN_DESCRIPTION
    } else if (RESULT_ENDS.has(code)) taking = undefined
    return message
  }
  return {
    parse: (buffer, callback) =>
      parser.parse(buffer, (message) => {
        if (message !== TAKEN) callback(message)
      }),
  }
}
