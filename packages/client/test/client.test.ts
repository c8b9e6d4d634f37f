import { mkdtempSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { inspect } from 'node:util'
import { describe, expect, it } from 'vitest'
import { QUERY_PARAMETERS } from '../src/generated/api.js'
import {
  ApiError,
  AuthenticationError,
  BadRequestError,
  CLIENT_VERSION,
  type ClientEvent,
  InvalidParametersError,
  KeyExpiredError,
  KeyRevokedError,
  NetworkError,
  Openbook,
  OpenbookError,
  ServerError,
  TimeoutError,
  UsageError,
} from '../src/index.js'
import { runPgSync, runSync, SyncTargetError } from '../src/sync/index.js'
import { queryIssues, type Wire } from '../src/validate.js'

const appointmentsIssues = (query: Wire) => queryIssues('listAppointments', query)

const KEY = `svc_test_${'ab12'.repeat(16)}`
const BASE = 'http://api.test'

type Handler = (url: URL, init: RequestInit) => Response | Promise<Response>

/** A fetch that answers from `handler` and records every call. */
function fakeFetch(handler: Handler) {
  const calls: { url: URL; headers: Record<string, string> }[] = []
  const fetchImpl = (async (input: URL | RequestInfo, init: RequestInit = {}) => {
    const url = new URL(String(input))
    calls.push({ url, headers: init.headers as Record<string, string> })
    return handler(url, init)
  }) as typeof fetch
  return { fetchImpl, calls }
}

const json = (status: number, body: unknown, headers: Record<string, string> = {}) =>
  new Response(JSON.stringify(body), {
    status,
    headers: { 'content-type': 'application/json', 'x-request-id': `req-${status}`, ...headers },
  })

const page = (data: unknown[] = []) =>
  json(200, { data, pagination: { limit: 50, offset: 0, total: data.length, hasMore: false } })

const fast = { baseDelayMs: 1, maxDelayMs: 5 }

function client(handler: Handler, options: Partial<ConstructorParameters<typeof Openbook>[0]> = {}) {
  const { fetchImpl, calls } = fakeFetch(handler)
  const events: ClientEvent[] = []
  const openbook = new Openbook({
    apiKey: KEY,
    baseUrl: BASE,
    fetch: fetchImpl,
    retry: fast,
    onEvent: (event) => events.push(event),
    ...options,
  })
  return { openbook, calls, events }
}

async function failure(promise: Promise<unknown>): Promise<OpenbookError> {
  try {
    await promise
  } catch (error) {
    return error as OpenbookError
  }
  throw new Error('expected a failure')
}

describe('constructor', () => {
  it('refuses a key that is not <brand>_(test|live)_ and 64 lowercase hex digits', () => {
    for (const apiKey of [
      '',
      'svc_test_',
      `svc_prod_${'a'.repeat(64)}`,
      `svc_test_${'A'.repeat(64)}`,
      `svc_test_${'a'.repeat(63)}`,
      `svc_test_${'a'.repeat(65)}`,
      `Svc_test_${'a'.repeat(64)}`,
      ` svc_test_${'a'.repeat(64)}`,
      `svc_test_${'a'.repeat(64)}\n`,
    ]) {
      let thrown: unknown
      try {
        new Openbook({ apiKey, baseUrl: BASE })
      } catch (error) {
        thrown = error
      }
      expect(thrown, apiKey).toBeInstanceOf(UsageError)
      expect(String(thrown)).not.toContain('a'.repeat(63))
    }
    expect(() => new Openbook({ apiKey: `acme_live_${'0'.repeat(64)}`, baseUrl: BASE })).not.toThrow()
  })

  it('throws only OpenbookErrors: a wrong call is a UsageError, with a code, never retried', async () => {
    // A file where a folder should be: the output cannot be created.
    const notFolder = join(mkdtempSync(join(tmpdir(), 'openbook-client-')), 'file')
    writeFileSync(notFolder, '')
    const attempts: (() => unknown)[] = [
      () => new Openbook({ apiKey: 'nope', baseUrl: BASE }),
      () => new Openbook({ apiKey: KEY, baseUrl: 'ftp://host' }),
      () => new Openbook({ apiKey: KEY, baseUrl: BASE, timeoutMs: -1 }),
      () => new Openbook({ apiKey: KEY, baseUrl: BASE, retry: { maxAttempts: Number.NaN } }),
      () => new Openbook({ apiKey: KEY, baseUrl: BASE }).customers.all({ pageSize: 500 }),
      () => new Openbook({ apiKey: KEY, baseUrl: BASE }).appointments.all({ status: 'lost' as never }),
      () => new Openbook({ apiKey: KEY, baseUrl: BASE }).customers.list({ limt: 5 } as never),
      () => runSync({ resource: 'customers', apiKey: KEY, baseUrl: BASE, out: 'x.txt' }),
      () => runSync({ resource: 'customers', apiKey: KEY, baseUrl: BASE, out: join(notFolder, 'x.ndjson') }),
      () => runPgSync({ resource: 'customers', apiKey: KEY, baseUrl: BASE, pg: 'mysql://x/y' }),
    ]
    for (const attempt of attempts) {
      let thrown: unknown
      try {
        await attempt()
      } catch (error) {
        thrown = error
      }
      expect(thrown, String(attempt)).toBeInstanceOf(OpenbookError)
      expect((thrown as OpenbookError).code, String(attempt)).toEqual(expect.any(String))
      expect((thrown as OpenbookError).retryable || thrown instanceof SyncTargetError, String(attempt)).toBe(
        thrown instanceof SyncTargetError,
      )
    }
  })

  it('refuses a base URL that is not http(s) or carries credentials', () => {
    expect(() => new Openbook({ apiKey: KEY, baseUrl: 'localhost:3000' })).toThrow(/baseUrl/)
    expect(() => new Openbook({ apiKey: KEY, baseUrl: 'http://u:p@host' })).toThrow(/credentials/)
  })
})

describe('the key stays secret', () => {
  it('is not in JSON.stringify, util.inspect, or any property', () => {
    const { openbook } = client(() => page())
    expect(JSON.stringify(openbook)).not.toContain(KEY)
    expect(inspect(openbook, { showHidden: true, depth: Number.POSITIVE_INFINITY })).not.toContain(KEY)
    expect(inspect(openbook.customers, { showHidden: true, depth: Number.POSITIVE_INFINITY })).not.toContain(
      KEY,
    )
    expect(JSON.stringify(openbook.appointments)).not.toContain(KEY)
    expect(JSON.stringify(openbook)).toBe(JSON.stringify({ baseUrl: `${BASE}/` }))
  })

  it('is sent only in the Authorization header', async () => {
    const { openbook, calls } = client(() => page())
    await openbook.customers.list({ limit: 2 })
    expect(calls[0]?.headers.authorization).toBe(`Bearer ${KEY}`)
    expect(calls[0]?.url.href).not.toContain(KEY)
    expect(calls[0]?.headers['user-agent']).toMatch(new RegExp(`^openbook-client/${CLIENT_VERSION} node/`))
  })

  it('is in no error and no event, whatever fails', async () => {
    const answers: Handler[] = [
      () =>
        json(400, { error: 'Invalid query parameters', message: 'x', code: 'invalid_query', details: [] }),
      () =>
        json(401, { error: 'Unauthorized', message: 'Invalid or expired API key', code: 'invalid_api_key' }),
      () => json(404, { error: 'Not Found', code: 'not_found' }),
      () => json(500, { error: 'Internal server error', code: 'internal_error' }),
      () =>
        Promise.reject(new TypeError('fetch failed', { cause: new Error(`connect ECONNREFUSED ${KEY}`) })),
      (_url, init) =>
        new Promise((_resolve, reject) =>
          init.signal?.addEventListener('abort', () => reject(init.signal?.reason)),
        ),
    ]
    for (const handler of answers) {
      const { openbook, events } = client(handler, { timeoutMs: 20, retry: { ...fast, maxAttempts: 2 } })
      const error = await failure(openbook.customers.list())
      expect(error).toBeInstanceOf(OpenbookError)
      expect(JSON.stringify(error)).not.toContain(KEY)
      expect(error.message).not.toContain(KEY)
      expect(JSON.stringify(events)).not.toContain(KEY)
      expect(inspect(error, { depth: 0 })).not.toContain(KEY)
    }
  })
})

describe('errors', () => {
  it('400 is a BadRequestError with details and the request id, never retried', async () => {
    const details = [{ code: 'too_big', path: ['limit'], message: 'limit must be at most 100' }]
    const { openbook, calls } = client(() =>
      json(400, { error: 'Invalid query parameters', message: 'limit: …', code: 'invalid_query', details }),
    )
    const error = await failure(openbook.customers.list())
    expect(error).toBeInstanceOf(BadRequestError)
    expect(error).not.toBeInstanceOf(InvalidParametersError)
    expect(error).toMatchObject({
      status: 400,
      error: 'Invalid query parameters',
      code: 'invalid_query',
      requestId: 'req-400',
      details,
    })
    expect(calls).toHaveLength(1)
  })

  it('401 is an AuthenticationError, never retried', async () => {
    const { openbook, calls } = client(() =>
      json(401, { error: 'Unauthorized', message: 'Invalid or expired API key', code: 'invalid_api_key' }),
    )
    const error = await failure(openbook.appointments.list())
    expect(error).toBeInstanceOf(AuthenticationError)
    expect(error).toMatchObject({ status: 401, message: 'Invalid or expired API key', requestId: 'req-401' })
    expect(calls).toHaveLength(1)
  })

  it('401 expired_api_key and revoked_api_key are their own AuthenticationErrors, never retried', async () => {
    for (const [code, kind] of [
      ['expired_api_key', KeyExpiredError],
      ['revoked_api_key', KeyRevokedError],
    ] as const) {
      const { openbook, calls } = client(() =>
        json(401, { error: 'Unauthorized', message: 'Invalid or expired API key', code }),
      )
      const error = await failure(openbook.customers.list())
      expect(error).toBeInstanceOf(kind)
      expect(error).toBeInstanceOf(AuthenticationError)
      expect(error).toMatchObject({ status: 401, code, name: kind.name })
      expect(calls).toHaveLength(1)
    }
  })

  it("a page carries the key's expiry from Openbook-Key-Expires; the response event too, never the body", async () => {
    const expiring = { 'openbook-key-expires': 'Fri, 02 Jan 2099 03:04:05 GMT' }
    const { openbook, events } = client(() =>
      json(200, { data: [], pagination: { limit: 50, offset: 0, total: 0, hasMore: false } }, expiring),
    )
    const listed = await openbook.customers.list()
    expect(listed.keyExpiresAt).toEqual(new Date('2099-01-02T03:04:05Z'))
    const response = events.find((event) => event.type === 'response')
    expect(response).toMatchObject({ keyExpiresAt: new Date('2099-01-02T03:04:05Z') })
    expect(response).not.toHaveProperty('body')
    const plain = client(() => page())
    expect((await plain.openbook.customers.list()).keyExpiresAt).toBeUndefined()
  })

  it("every result carries the key's expiry and organization, a 304 too, and all() after an unchanged night", async () => {
    const headers = {
      'openbook-key-expires': 'Fri, 02 Jan 2099 03:04:05 GMT',
      'openbook-organization': 'org_x',
      etag: '"7-abc"',
    }
    const { openbook, calls } = client((_url, init) =>
      (init.headers as Record<string, string>)['if-none-match']
        ? new Response(null, { status: 304, headers })
        : json(200, { data: [], pagination: { limit: 100, offset: 0, total: 0, hasMore: false } }, headers),
    )
    const expires = new Date('2099-01-02T03:04:05Z')
    const listed = await openbook.customers.list()
    expect(listed).toMatchObject({ keyExpiresAt: expires, organizationId: 'org_x', etag: '"7-abc"' })
    const notModified = await openbook.customers.list({}, { ifNoneMatch: '"7-abc"' })
    expect(notModified).toMatchObject({ notModified: true, keyExpiresAt: expires, organizationId: 'org_x' })
    const all = openbook.customers.all({ ifNoneMatch: '"7-abc"' })
    expect(await all.toArray()).toEqual([])
    expect(all).toMatchObject({ notModified: true, keyExpiresAt: expires, organizationId: 'org_x' })
    // all() reads pages of 100 by default, as openbook-sync does.
    expect(calls.at(-1)?.url.searchParams.get('limit')).toBe('100')
  })

  it('unchanged() tells whether the list changed since the iteration began: one conditional request', async () => {
    let version = 1
    const { openbook, calls } = client((_url, init) => {
      const tag = `"${version}-abc"`
      if ((init.headers as Record<string, string>)['if-none-match'] === tag)
        return new Response(null, { status: 304, headers: { etag: tag } })
      return json(
        200,
        { data: [], pagination: { limit: 100, offset: 0, total: 0, hasMore: false } },
        { etag: tag },
      )
    })
    const customers = openbook.customers.all()
    await customers.toArray()
    expect(await customers.unchanged()).toBe(true)
    version = 2
    expect(await customers.unchanged()).toBe(false)
    expect(calls.map((call) => call.headers['if-none-match'])).toEqual([undefined, '"1-abc"', '"1-abc"'])
    expect(customers.stats.requests).toBe(3)
  })

  it('asks for compressed pages (br, then gzip)', async () => {
    const { openbook, calls } = client(() => page())
    await openbook.customers.list()
    expect(calls[0]?.headers['accept-encoding']).toBe('br, gzip')
  })

  it('404 and 405 are ApiErrors, never retried', async () => {
    for (const status of [404, 405]) {
      const { openbook, calls } = client(() => json(status, { error: 'Not Found', code: 'not_found' }))
      const error = await failure(openbook.customers.list())
      expect(error).toBeInstanceOf(ApiError)
      expect(error).toMatchObject({ status, code: 'not_found', requestId: `req-${status}` })
      expect(calls).toHaveLength(1)
    }
  })

  it('5xx is retried, then a ServerError with the last request id', async () => {
    const { openbook, calls, events } = client(() =>
      json(500, { error: 'Internal server error', message: 'boom', code: 'internal_error' }),
    )
    const error = await failure(openbook.customers.list())
    expect(error).toBeInstanceOf(ServerError)
    expect(error).toMatchObject({ status: 500, error: 'Internal server error', message: 'boom' })
    expect(calls).toHaveLength(4)
    expect(events.filter((event) => event.type === 'retry')).toHaveLength(3)
  })

  it('a non-JSON 502 from a proxy is a ServerError too', async () => {
    const { openbook } = client(() => new Response('<html>bad gateway</html>', { status: 502 }))
    const error = await failure(openbook.customers.list())
    expect(error).toBeInstanceOf(ServerError)
    expect(error).toMatchObject({ status: 502, error: 'HTTP 502' })
  })

  it('a time-out is a TimeoutError, retried', async () => {
    const { openbook, calls } = client(
      (_url, init) =>
        new Promise((_resolve, reject) =>
          init.signal?.addEventListener('abort', () => reject(init.signal?.reason)),
        ),
      { timeoutMs: 30, retry: { ...fast, maxAttempts: 3 } },
    )
    const error = await failure(openbook.customers.list())
    expect(error).toBeInstanceOf(TimeoutError)
    expect(error).toMatchObject({ status: undefined, code: 'timeout', error: 'Timeout' })
    expect(calls).toHaveLength(3)
  })

  it('a connection error is a NetworkError, retried, and a later success wins', async () => {
    let n = 0
    const { openbook, calls } = client(() => {
      n++
      if (n < 3) return Promise.reject(new TypeError('fetch failed', { cause: { code: 'ECONNRESET' } }))
      return page([{ id: 'c1' }])
    })
    const result = await openbook.customers.list()
    expect(result.data).toEqual([{ id: 'c1' }])
    expect(result.requestId).toBe('req-200')
    expect(calls).toHaveLength(3)

    const { openbook: down } = client(() =>
      Promise.reject(new TypeError('fetch failed', { cause: { code: 'ECONNREFUSED' } })),
    )
    const error = await failure(down.customers.list())
    expect(error).toBeInstanceOf(NetworkError)
    expect(error.message).toContain('ECONNREFUSED')
  })
})

describe('retries', () => {
  it('use full-jitter exponential backoff within the ceiling', async () => {
    const { openbook, events } = client(() => json(503, { error: 'Service Unavailable' }), {
      retry: { maxAttempts: 6, baseDelayMs: 4, maxDelayMs: 10 },
    })
    await failure(openbook.customers.list())
    const delays = events.flatMap((event) => (event.type === 'retry' ? [event.delayMs] : []))
    expect(delays).toHaveLength(5)
    delays.forEach((delay, index) => {
      expect(delay).toBeGreaterThanOrEqual(0)
      expect(delay).toBeLessThanOrEqual(Math.min(10, 4 * 2 ** index))
    })
  })

  it('honour Retry-After and stop when the total time would be exceeded', async () => {
    const { openbook, calls } = client(
      () => json(503, { error: 'Service Unavailable' }, { 'retry-after': '5' }),
      {
        retry: { maxAttempts: 10, maxElapsedMs: 1_000 },
      },
    )
    const started = Date.now()
    const error = await failure(openbook.customers.list())
    expect(error).toBeInstanceOf(ServerError)
    expect((error as ServerError).retryAfterSeconds).toBe(5)
    expect(calls).toHaveLength(1)
    expect(Date.now() - started).toBeLessThan(1_000)
  })

  it('are off with retry: false', async () => {
    const { openbook, calls } = client(() => json(500, { error: 'x' }), { retry: false })
    await failure(openbook.customers.list())
    expect(calls).toHaveLength(1)
  })

  it('stop at once when the AbortSignal fires, during a request or a backoff', async () => {
    const controller = new AbortController()
    const { openbook, calls } = client(() => json(500, { error: 'x' }), {
      retry: { maxAttempts: 10, baseDelayMs: 10_000, maxDelayMs: 10_000 },
    })
    const pending = failure(openbook.customers.list({}, { signal: controller.signal }))
    setTimeout(() => controller.abort(new Error('stop now')), 50)
    const error = await pending
    expect(String(error)).toContain('stop now')
    expect(calls.length).toBeLessThanOrEqual(2)

    const hanging = client(
      (_url, init) =>
        new Promise((_resolve, reject) =>
          init.signal?.addEventListener('abort', () => reject(init.signal?.reason)),
        ),
    )
    const aborted = AbortSignal.timeout(30)
    const reason = await failure(hanging.openbook.appointments.list({}, { signal: aborted }))
    expect((reason as unknown as DOMException).name).toBe('TimeoutError')
    expect(reason).not.toBeInstanceOf(OpenbookError)
    expect(hanging.calls).toHaveLength(1)
  })
})

describe('parameters', () => {
  it('are refused before any request, in the server words', async () => {
    const { openbook, calls } = client(() => page())
    const error = await failure(openbook.customers.list({ limit: 101, offset: -1 }))
    expect(error).toBeInstanceOf(InvalidParametersError)
    expect(error).toBeInstanceOf(BadRequestError)
    expect(error.message).toBe('limit: limit must be at most 100; offset: offset must be at least 0')
    expect(error).toMatchObject({ status: 400, code: 'invalid_query', requestId: undefined })
    const status = await failure(openbook.appointments.list({ status: 'done' as never, limit: 1.5 }))
    expect(status.message).toBe(
      "limit: limit must be a decimal integer, given once; status: Invalid enum value. Expected 'scheduled' | 'confirmed' | 'checked_in' | 'no_show' | 'cancelled' | 'completed', received 'done'",
    )
    expect(() => openbook.appointments.all({ startDate: '2026-02-30T00:00:00Z' })).toThrow(
      'startDate: startDate is not a calendar date',
    )
    expect(calls).toHaveLength(0)
  })

  it('refuse unknown names, and send Dates as ISO-8601', async () => {
    const { openbook, calls } = client(() => page())
    await expect(openbook.customers.list({ limt: 5 } as never)).rejects.toThrow(/unknown parameter "limt"/)
    await openbook.appointments.list({ startDate: new Date('2026-01-01T00:00:00Z'), status: 'confirmed' })
    expect(calls[0]?.url.search).toBe('?startDate=2026-01-01T00%3A00%3A00.000Z&status=confirmed')
  })
})

describe('checks that span fields, as the server runs them', () => {
  const reversed = { startDate: '2026-01-31T10:00:00Z', endDate: '2025-01-01T10:00:00Z' }
  const messages = (query: Record<string, string>) => appointmentsIssues(query).map((issue) => issue.message)

  it('run only once every parameter is valid on its own', () => {
    expect(messages({ ...reversed, offset: '-5' })).toEqual(['offset must be at least 0'])
    expect(messages({ ...reversed, limit: '0' })).toEqual(['limit must be at least 1'])
    expect(messages({ ...reversed, status: 'done' })).toHaveLength(1)
    expect(messages(reversed)).toEqual(['endDate must not be before startDate'])
  })
})

describe('date-time checks', () => {
  it("are the server's own rules, as generated from its document (regenerate when this fails)", async () => {
    // The server's single definition, read from its source: no build, no server.
    const source = new URL('../../../src/schemas/query.ts', import.meta.url).href
    const server = (await import(/* @vite-ignore */ source)) as {
      DATE_TIME_UPPER_CASE: string
      dateTimeChecks(name: string): readonly object[]
    }
    const dateTimes = QUERY_PARAMETERS.listAppointments.filter((parameter) => parameter.kind === 'dateTime')
    expect(dateTimes.map((parameter) => parameter.name)).toEqual(['startDate', 'endDate'])
    for (const parameter of dateTimes) {
      expect(parameter.upperCase, parameter.name).toBe(server.DATE_TIME_UPPER_CASE)
      expect(parameter.checks, parameter.name).toEqual(server.dateTimeChecks(parameter.name))
    }
  })

  it('apply every published check to the text as the server reads it, reporting each that fails', () => {
    const issues = appointmentsIssues({ startDate: '0000-02-29t10:00:00.1234567890+16:00' })
    expect(issues).toEqual([
      { code: 'custom', message: 'startDate is not a calendar date', path: ['startDate'] },
      {
        code: 'custom',
        message: 'startDate must have a UTC offset between -15:59 and +15:59',
        path: ['startDate'],
      },
      {
        code: 'custom',
        message: 'startDate must have at most 9 fractional-second digits',
        path: ['startDate'],
      },
    ])
    expect(appointmentsIssues({ endDate: '2026-07-29t10:41:03.123456789z' })).toEqual([])
    expect(appointmentsIssues({ endDate: '29/07/2026' }).map((issue) => issue.message)).toEqual([
      'endDate must be an ISO-8601 date-time with Z or an offset',
      'endDate is not a calendar date',
    ])
  })
})
