import { describe, expect, it } from 'vitest'
import { type BackendMessage, rowParser } from '../../src/store/row-parser.js'
import type { RowSink } from '../../src/store/types.js'

/**
 * The connection's parser (store/row-parser.ts) hands the DataRow messages of a result a sink
 * accepts to the sink, and tells the driver of that result no columns: the driver would make a
 * type parser and a template row for each, and it reads none of its rows.
 */

/** A backend message: its code, its length (itself included), its body. */
function message(code: string, body: Buffer): Buffer {
  const head = Buffer.alloc(5)
  head.write(code, 0, 'latin1')
  head.writeInt32BE(body.length + 4, 1)
  return Buffer.concat([head, body])
}

/** A RowDescription of text columns named `names`. */
function rowDescription(names: readonly string[]): Buffer {
  const count = Buffer.alloc(2)
  count.writeInt16BE(names.length)
  const fields = names.map((name) => {
    const field = Buffer.alloc(18)
    field.writeInt32BE(25, 6)
    field.writeInt16BE(-1, 10)
    field.writeInt32BE(-1, 12)
    return Buffer.concat([Buffer.from(`${name}\0`), field])
  })
  return message('T', Buffer.concat([count, ...fields]))
}

/** A DataRow of text values. */
function dataRow(values: readonly string[]): Buffer {
  const count = Buffer.alloc(2)
  count.writeInt16BE(values.length)
  const fields = values.map((value) => {
    const length = Buffer.alloc(4)
    length.writeInt32BE(Buffer.byteLength(value))
    return Buffer.concat([length, Buffer.from(value)])
  })
  return message('D', Buffer.concat([count, ...fields]))
}

const commandComplete = (tag: string) => message('C', Buffer.from(`${tag}\0`))

describe('the row parser', () => {
  it('tells the driver no columns for a result the sink takes, and every column of the others', () => {
    const taken: string[] = []
    const sink: RowSink = {
      accepts: (fields) => fields.map((field) => field.name).join() === 'a,b',
      row: (bytes, offset, length) => taken.push(bytes.subarray(offset, offset + length - 4).toString('hex')),
    }
    const seen: BackendMessage[] = []
    const stream = Buffer.concat([
      rowDescription(['settings']),
      dataRow(['on']),
      commandComplete('SELECT 1'),
      rowDescription(['a', 'b']),
      dataRow(['1', 'x']),
      dataRow(['2', 'y']),
      commandComplete('SELECT 2'),
      rowDescription(['other']),
      dataRow(['after']),
      commandComplete('SELECT 1'),
    ])
    rowParser(() => sink).parse(stream, (parsed) => seen.push(parsed))
    const descriptions = seen.filter((parsed) => parsed.name === 'rowDescription')
    expect(descriptions.map((parsed) => parsed.fields?.map((field) => field.name))).toEqual([
      ['settings'],
      [],
      ['other'],
    ])
    // The taken rows reach the sink whole (a message's length counts its own four bytes) and the
    // driver not at all; the others reach the driver.
    expect(taken).toEqual([
      dataRow(['1', 'x']).subarray(5).toString('hex'),
      dataRow(['2', 'y']).subarray(5).toString('hex'),
    ])
    expect(seen.filter((parsed) => parsed.name === 'dataRow')).toHaveLength(2)
    expect(seen.filter((parsed) => parsed.name === 'commandComplete')).toHaveLength(3)
  })
})
