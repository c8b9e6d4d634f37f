/**
 * The ceiling for any Node service over this schema: plain node:http and pg, the
 * same transaction, key lookup and SQL as openbook (its own query functions), in the same round
 * trips with the same prepared statements, the items written as openbook writes them (from the
 * rows' bytes, through the same pg client: store/postgres/row-tap.ts) with the envelope around
 * them. No framework, validation beyond the essentials, logging or response schema.
 *
 * DATABASE_URL=… PORT=… [POOL_SIZE=10] [API_KEY_BRAND=svc] node --import tsx bench/baseline-server.ts
 */
import { createHash } from 'node:crypto'
import { createServer, type ServerResponse } from 'node:http'
import pg from 'pg'
import { hashSecret, secretPattern } from '../src/domain/api-key-secret.js'
import { tuneGarbageCollector } from '../src/gc-tuning.js'
import { authenticateKey } from '../src/queries/api-keys.js'
import { pageBody } from '../src/queries/page.js'
import { executeText, prepareText } from '../src/store/one-trip.js'
import { rowTap } from '../src/store/postgres/row-tap.js'
import { KEY_ORGANIZATION, type Sql } from '../src/store/types.js'
import { type ListRequest, listPage, parseListRequest, READER_SETTINGS } from './sql.js'

// The same V8 setting as openbook's server: the ceiling is measured as openbook runs.
tuneGarbageCollector()

const pool = new pg.Pool({
  ...(rowTap ? { Client: rowTap.Client } : {}),
  connectionString: process.env.DATABASE_URL,
  max: Number(process.env.POOL_SIZE ?? 10),
})
const keyFormat = secretPattern(process.env.API_KEY_BRAND ?? 'svc')

/** Sends `body`, written as JSON unless it is JSON text already. */
function send(response: ServerResponse, status: number, body: unknown): void {
  const text = typeof body === 'string' || Buffer.isBuffer(body) ? body : JSON.stringify(body)
  response.writeHead(status, {
    'content-type': 'application/json; charset=utf-8',
    'content-length': Buffer.byteLength(text),
  })
  response.end(text)
}

const names = new Map<string, string>()
/** Per connection, the statements it has PREPAREd. */
const preparedOn = new WeakMap<pg.PoolClient, Set<string>>()

/** A prepared statement's name per statement text, as openbook names its own. */
function statementName(text: string): string {
  let name = names.get(text)
  if (!name) {
    name = `bench_${createHash('sha256').update(text).digest('hex').slice(0, 24)}`
    names.set(text, name)
  }
  return name
}

/**
 * The request in openbook's round trips: BEGIN and its settings, the key lookup and the page go in
 * one simple-protocol message (the page as EXECUTE of a statement PREPAREd once per connection,
 * the key's organization bound by the database), and the read-only COMMIT is queued without
 * waiting for its answer. An empty page comes with its total in the same statement, as in openbook.
 */
async function handle(secret: string, request: ListRequest): Promise<{ status: number; body: unknown }> {
  const client = await pool.connect()
  let prepared = preparedOn.get(client)
  if (!prepared) {
    prepared = new Set()
    preparedOn.set(client, prepared)
  }
  const known = prepared
  /** `text` EXECUTEd, PREPAREd first where this connection has not (known once the message is back). */
  const executeOnce = (text: string, params: readonly unknown[]) => {
    const name = statementName(text)
    const texts = known.has(name) ? [] : [prepareText(name, text)]
    texts.push(executeText(name, params))
    return { name, texts }
  }
  // BEGIN, and the settings EXECUTEd.
  const settings = executeOnce(READER_SETTINGS, [])
  let opening: string | undefined = ['BEGIN', ...settings.texts].join('; ')
  let held: { texts: string[]; resolve: (rows: object[]) => void; reject: (error: unknown) => void }[] = []
  async function message(texts: string[]): Promise<object[]> {
    const batch = held
    held = []
    const all = [...(opening === undefined ? [] : [opening]), ...batch.flatMap((h) => h.texts), ...texts]
    opening = undefined
    try {
      const answer = (await client.query(all.join('; '))) as unknown as pg.QueryResult | pg.QueryResult[]
      const results = Array.isArray(answer) ? answer : [answer]
      known.add(settings.name)
      // Each held statement's answer is the last of its texts.
      let at = results.length - texts.length - batch.reduce((sum, h) => sum + h.texts.length, 0)
      for (const h of batch) {
        at += h.texts.length
        h.resolve(results[at - 1]?.rows ?? [])
      }
      return results.at(-1)?.rows ?? []
    } catch (error) {
      for (const h of batch) h.reject(error)
      throw error
    }
  }
  const sql: Sql = {
    async query<Row extends object>(text: string, params: readonly unknown[] = []) {
      const name = statementName(text)
      const texts = known.has(name) ? [] : [prepareText(name, text)]
      texts.push(executeText(name, params))
      const rows = await message(texts)
      known.add(name)
      return rows as Row[]
    },
    async exec(text: string) {
      await message([text])
    },
    ...(rowTap?.tapped(client)
      ? {
          queryInto: async (sink, text, params) => {
            await rowTap?.into(client, sink, () => sql.query(text, params))
          },
        }
      : {}),
    sendWithNext: <Row extends object>(text: string, params: readonly unknown[] = []) =>
      new Promise<Row[]>((resolve, reject) => {
        const statement = params.length === 0 ? { name: undefined, texts: [text] } : executeOnce(text, params)
        held.push({
          texts: statement.texts,
          resolve: (rows) => {
            if (statement.name) known.add(statement.name)
            resolve(rows as Row[])
          },
          reject,
        })
      }),
  }
  try {
    const lookup = authenticateKey(sql, hashSecret(secret), { withNext: true })
    const page = listPage(sql, KEY_ORGANIZATION, request)
    page.catch(() => undefined)
    const key = await lookup
    const result = key
      ? { status: 200, body: pageBody(await page) }
      : { status: 401, body: { error: 'Unauthorized' } }
    if (!key) await page.catch(() => undefined)
    client.query('COMMIT').catch(() => undefined)
    client.release()
    return result
  } catch (error) {
    client.release(true)
    throw error
  }
}

const server = createServer((request, response) => {
  const secret = /^Bearer (\S+)$/.exec(request.headers.authorization ?? '')?.[1]
  if (secret === undefined || !keyFormat.test(secret)) return send(response, 401, { error: 'Unauthorized' })
  const parsed = parseListRequest(request.url ?? '')
  if (!parsed) return send(response, 400, { error: 'Invalid query parameters' })
  handle(secret, parsed).then(
    ({ status, body }) => send(response, status, body),
    () => send(response, 500, { error: 'Internal server error' }),
  )
})
server.keepAliveTimeout = 5_000
server.listen(Number(process.env.PORT ?? 3100), '127.0.0.1')

function shutdown(): void {
  server.close()
  server.closeAllConnections()
  void pool.end().then(() => process.exit(0))
}
process.on('SIGTERM', shutdown)
process.on('SIGINT', shutdown)
