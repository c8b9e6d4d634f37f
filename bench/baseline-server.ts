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
import { KEY_ORGANIZATION, type RowSink, type Sql } from '../src/store/types.js'
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
 * A connection as a request uses it: `send` one simple-protocol message (its rows, where `sink`
 * accepts them, to the sink), `known` the statements PREPAREd on it, `opening` what goes first in
 * the request's first message.
 */
interface Channel {
  send(text: string, sink?: RowSink): Promise<pg.QueryResult | pg.QueryResult[]>
  readonly known: Set<string>
  readonly opening: string
  /** Whether a statement counts as prepared once sent (a pipelined connection's next message may follow before the answer). */
  readonly preparedWhenSent: boolean
}

/**
 * The request in openbook's round trips: the settings, the key lookup and the page go in one
 * simple-protocol message (the page as EXECUTE of a statement PREPAREd once per connection, the
 * key's organization bound by the database). On a pooled connection the message begins with BEGIN
 * and the read-only COMMIT is queued without waiting for its answer; on a pipelined one
 * (`PIPELINE_DEPTH`) the message is its own implicit transaction, as openbook sends it. An empty
 * page comes with its total in the same statement, as in openbook.
 */
async function handleOn(
  channel: Channel,
  secret: string,
  request: ListRequest,
): Promise<{ status: number; body: unknown }> {
  const { known } = channel
  /** `text` EXECUTEd, PREPAREd first where this connection has not (known once the message is back). */
  const executeOnce = (text: string, params: readonly unknown[]) => {
    const name = statementName(text)
    const texts = known.has(name) ? [] : [prepareText(name, text)]
    texts.push(executeText(name, params))
    return { name, texts }
  }
  const settings = executeOnce(READER_SETTINGS, [])
  let opening: string | undefined = [channel.opening, ...settings.texts].filter(Boolean).join('; ')
  let held: { texts: string[]; resolve: (rows: object[]) => void; reject: (error: unknown) => void }[] = []
  async function message(texts: string[], sink?: RowSink): Promise<object[]> {
    const batch = held
    held = []
    const all = [...(opening === undefined ? [] : [opening]), ...batch.flatMap((h) => h.texts), ...texts]
    opening = undefined
    if (channel.preparedWhenSent)
      for (const text of all) {
        const prepared = /^PREPARE (\S+) AS /.exec(text)?.[1]
        if (prepared) known.add(prepared)
      }
    try {
      const answer = await channel.send(all.join('; '), sink)
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
  const query = async <Row extends object>(text: string, params: readonly unknown[] = [], sink?: RowSink) => {
    const { name, texts } = executeOnce(text, params)
    const rows = await message(texts, sink)
    known.add(name)
    return rows as Row[]
  }
  const sql: Sql = {
    query,
    async exec(text: string) {
      await message([text])
    },
    ...(rowTap
      ? {
          queryInto: async (sink, text, params) => {
            await query(text, params, sink)
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
  const lookup = authenticateKey(sql, hashSecret(secret), { withNext: true })
  const page = listPage(sql, KEY_ORGANIZATION, request)
  page.catch(() => undefined)
  const key = await lookup
  // A key refused comes back as a word ('unknown', 'revoked', 'expired').
  const found = typeof key === 'object'
  const result = found
    ? { status: 200, body: pageBody(await page) }
    : { status: 401, body: { error: 'Unauthorized' } }
  if (!found) await page.catch(() => undefined)
  return result
}

type Tapped = pg.PoolClient & {
  sendInto(sink: RowSink, text: string): Promise<pg.QueryResult | pg.QueryResult[]>
}

/** A request on a connection of its own from the pool, BEGIN to COMMIT. */
async function handlePooled(
  secret: string,
  request: ListRequest,
): Promise<{ status: number; body: unknown }> {
  const client = (await pool.connect()) as Tapped
  let known = preparedOn.get(client)
  if (!known) {
    known = new Set()
    preparedOn.set(client, known)
  }
  const channel: Channel = {
    send: (text, sink) =>
      sink && rowTap
        ? client.sendInto(sink, text)
        : (client.query(text) as unknown as Promise<pg.QueryResult>),
    known,
    opening: 'BEGIN',
    preparedWhenSent: false,
  }
  try {
    const result = await handleOn(channel, secret, request)
    client.query('COMMIT').catch(() => undefined)
    client.release()
    return result
  } catch (error) {
    client.release(true)
    throw error
  }
}

/**
 * `PIPELINE_DEPTH` d: POOL_SIZE connections shared by the requests, each carrying up to d
 * messages at once (node-postgres's pipeline mode), the messages of one turn of the event loop
 * written together (the socket corked until the turn ends). A request goes to a connection
 * already written to in this turn while it has room, else to the least busy one, else waits.
 */
const depth = Number(process.env.PIPELINE_DEPTH ?? 0)
interface Lane {
  readonly client: Promise<Tapped>
  inFlight: number
  corked: boolean
  readonly known: Set<string>
}
const lanes: Lane[] = []
const waiting: ((lane: Lane) => void)[] = []
function openLane(): Lane {
  const client = new (rowTap?.Client ?? pg.Client)({
    connectionString: process.env.DATABASE_URL,
    pipeline: true,
  } as pg.ClientConfig) as unknown as Tapped
  return { client: client.connect().then(() => client), inFlight: 0, corked: false, known: new Set() }
}
if (depth > 0) for (let i = 0; i < Number(process.env.POOL_SIZE ?? 10); i++) lanes.push(openLane())

/**
 * `PIPELINE_JOIN=tick`: a request joins a busy connection only in the turn it was written to,
 * else it takes an idle one or waits: what arrives together goes together, and nothing waits
 * behind a message sent earlier.
 */
const joinInTickOnly = process.env.PIPELINE_JOIN === 'tick'
function freeLane(): Lane | undefined {
  let best: Lane | undefined
  for (const lane of lanes) {
    if (lane.inFlight >= depth) continue
    if (lane.corked) return lane
    if (joinInTickOnly && lane.inFlight > 0) continue
    if (!best || lane.inFlight < best.inFlight) best = lane
  }
  return best
}

async function handlePipelined(
  secret: string,
  request: ListRequest,
): Promise<{ status: number; body: unknown }> {
  const lane = freeLane() ?? (await new Promise<Lane>((resolve) => waiting.push(resolve)))
  lane.inFlight++
  const client = await lane.client
  const stream = (client as unknown as { connection: { stream: import('node:net').Socket } }).connection
    .stream
  const channel: Channel = {
    send(text, sink) {
      if (!lane.corked) {
        lane.corked = true
        stream.cork()
        setImmediate(() => {
          lane.corked = false
          stream.uncork()
        })
      }
      return sink && rowTap
        ? client.sendInto(sink, text)
        : (client.query(text) as unknown as Promise<pg.QueryResult>)
    },
    known: lane.known,
    opening: '',
    preparedWhenSent: true,
  }
  try {
    return await handleOn(channel, secret, request)
  } finally {
    lane.inFlight--
    const next = waiting.shift()
    if (next) next(lane)
  }
}

const handle = depth > 0 ? handlePipelined : handlePooled

const server = createServer((request, response) => {
  const secret = /^Bearer (\S+)$/.exec(request.headers.authorization ?? '')?.[1]
  if (secret === undefined || !keyFormat.test(secret)) return send(response, 401, { error: 'Unauthorized' })
  const parsed = parseListRequest(request.url ?? '')
  if (!parsed) return send(response, 400, { error: 'Invalid query parameters' })
  handle(secret, parsed).then(
    ({ status, body }) => send(response, status, body),
    (error) => {
      if (process.env.BENCH_DEBUG) console.error(error)
      send(response, 500, { error: 'Internal server error' })
    },
  )
})
server.keepAliveTimeout = 5_000
server.listen(Number(process.env.PORT ?? 3100), '127.0.0.1')

function shutdown(): void {
  server.close()
  server.closeAllConnections()
  void Promise.all([pool.end(), ...lanes.map(async (lane) => (await lane.client).end())]).then(() =>
    process.exit(0),
  )
}
process.on('SIGTERM', shutdown)
process.on('SIGINT', shutdown)
