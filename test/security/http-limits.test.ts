import { maxHeaderSize as httpMaxHeaderSize } from 'node:http'
import { connect, type Socket } from 'node:net'
import type { FastifyInstance } from 'fastify'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { buildApp } from '../../src/app.js'
import { buildTestApp, listenOnLoopback } from '../helpers/app.js'
import { BRAND, createKey, createOrg } from '../helpers/fixtures.js'
import { createTestStore, describeEachStore, type TestStore } from '../helpers/stores.js'

interface RawResponse {
  status: number
  headers: Record<string, string>
  body: string
}

/** Sends bytes exactly as given on a fresh socket; resolves with the first response once the server ends it. */
function raw(port: number, request: string | Buffer, timeoutMs = 5_000): Promise<RawResponse> {
  return new Promise((resolve, reject) => {
    const socket = connect(port, '127.0.0.1')
    const chunks: Buffer[] = []
    const timer = setTimeout(() => {
      socket.destroy()
      reject(
        new Error(
          `no complete response within ${timeoutMs} ms: ${Buffer.concat(chunks).toString().slice(0, 200)}`,
        ),
      )
    }, timeoutMs)
    const finish = () => {
      const text = Buffer.concat(chunks).toString('utf8')
      const split = text.indexOf('\r\n\r\n')
      if (split < 0) return false
      const [statusLine = '', ...lines] = text.slice(0, split).split('\r\n')
      const headers: Record<string, string> = {}
      for (const line of lines) {
        const colon = line.indexOf(':')
        headers[line.slice(0, colon).trim().toLowerCase()] = line.slice(colon + 1).trim()
      }
      const body = text.slice(split + 4)
      const length = Number(headers['content-length'] ?? Number.NaN)
      if (Number.isFinite(length) && Buffer.byteLength(body) < length) return false
      clearTimeout(timer)
      socket.destroy()
      resolve({ status: Number(statusLine.split(' ')[1]), headers, body })
      return true
    }
    socket.on('data', (chunk) => {
      chunks.push(chunk)
      finish()
    })
    socket.on('error', () => {}) // a reset after the response is fine; the close handler decides
    socket.on('close', () => {
      if (!finish()) {
        clearTimeout(timer)
        reject(
          new Error(
            `connection closed without a response: ${Buffer.concat(chunks).toString().slice(0, 200)}`,
          ),
        )
      }
    })
    socket.write(request)
  })
}

interface Closed {
  /** Everything the server sent. */
  readonly text: string
  /** Who ended the connection: the server, or the test when `timeoutMs` passed first. */
  readonly closedBy: 'server' | 'timeout'
  readonly ms: number
}

/** Sends `request` and keeps the socket open until the server closes it (or `timeoutMs` passes). */
function untilClosed(port: number, request: string, timeoutMs: number): Promise<Closed> {
  return new Promise((resolve) => {
    const started = Date.now()
    const socket = connect(port, '127.0.0.1')
    const chunks: Buffer[] = []
    let done = false
    const finish = (closedBy: Closed['closedBy']) => {
      if (done) return
      done = true
      clearTimeout(timer)
      socket.destroy()
      resolve({ text: Buffer.concat(chunks).toString('utf8'), closedBy, ms: Date.now() - started })
    }
    const timer = setTimeout(() => finish('timeout'), timeoutMs)
    socket.on('data', (chunk) => chunks.push(chunk))
    socket.on('error', () => {})
    socket.on('end', () => finish('server'))
    socket.on('close', () => finish('server'))
    socket.write(request)
  })
}

const ERROR_KEYS = ['code', 'details', 'error', 'message']
function expectErrorShape(response: RawResponse, status: number) {
  expect(response.status).toBe(status)
  expect(response.headers['content-type']).toMatch(/^application\/json/)
  const body = JSON.parse(response.body) as Record<string, unknown>
  expect(typeof body.error).toBe('string')
  for (const key of Object.keys(body)) expect(ERROR_KEYS).toContain(key)
  return body
}

describeEachStore('limits over real HTTP on %s', (testStore) => {
  const { kind } = testStore
  let app: FastifyInstance
  let port: number
  let key: string

  beforeAll(async () => {
    const org = await createOrg(testStore.store, 'org_http')
    key = (await createKey(testStore.store, org)).key
    ;({ app } = await buildTestApp(testStore.store, { logLevel: 'silent' }))
    port = await listenOnLoopback(app)
  })
  afterAll(async () => {
    await app?.close()
  })

  const normal = async () => {
    const response = await fetch(`http://127.0.0.1:${port}/api/public/v1/customers`, {
      headers: { authorization: `Bearer ${key}` },
    })
    expect(response.status).toBe(200)
    await response.json()
  }

  const request = (lines: readonly string[], body = '') =>
    `${lines.join('\r\n')}\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n${body}`

  it('a header over 16 KiB: 431 in the error shape, and the server serves the next request', async () => {
    const response = await raw(
      port,
      request([
        'GET /api/public/v1/customers HTTP/1.1',
        `Authorization: Bearer ${key}`,
        `X-Big: ${'a'.repeat(17 * 1024)}`,
      ]),
    )
    expect(expectErrorShape(response, 431)).toMatchObject({ code: 'header_too_large' })
    await normal()
  })

  it('a URL over 16 KiB: 431 in the error shape, and the server serves the next request', async () => {
    const response = await raw(
      port,
      request([
        `GET /api/public/v1/appointments?customerId=${'a'.repeat(17 * 1024)} HTTP/1.1`,
        `Authorization: Bearer ${key}`,
      ]),
    )
    expect(expectErrorShape(response, 431)).toMatchObject({ code: 'header_too_large' })
    await normal()
  })

  it('many headers adding up past 16 KiB: 431', async () => {
    const many = Array.from({ length: 400 }, (_, i) => `X-H${i}: ${'b'.repeat(40)}`)
    const response = await raw(port, request(['GET /api/public/v1/customers HTTP/1.1', ...many]))
    expectErrorShape(response, 431)
    await normal()
  })

  it.each([
    ['a small JSON body', 200, ['Content-Type: application/json', 'Content-Length: 13'], '{"limit":100}'],
    ['a text body', 200, ['Content-Type: text/plain', 'Content-Length: 5'], 'hello'],
    ['an unknown content type', 200, ['Content-Type: application/x-evil', 'Content-Length: 3'], 'abc'],
    [
      'a body of exactly 1 KiB',
      200,
      ['Content-Type: application/json', 'Content-Length: 1024'],
      `"${'x'.repeat(1022)}"`,
    ],
    [
      'a body over the 1 KiB limit',
      413,
      ['Content-Type: application/json', 'Content-Length: 4000'],
      `"${'x'.repeat(3998)}"`,
    ],
    [
      'a chunked body',
      413,
      ['Content-Type: application/json', 'Transfer-Encoding: chunked'],
      '2\r\n{}\r\n0\r\n\r\n',
    ],
  ] as const)('a GET with %s: %i, JSON, and the server stays up', async (label, status, headers, body) => {
    const response = await raw(
      port,
      request(['GET /api/public/v1/customers HTTP/1.1', `Authorization: Bearer ${key}`, ...headers], body),
    )
    console.log(`[http ${kind}] GET with ${label}: ${response.status}`)
    expect(response.status).toBe(status)
    expect(response.headers['content-type']).toMatch(/^application\/json/)
    if (status === 200) {
      // A small body is ignored: the answer is the normal list.
      expect(JSON.parse(response.body)).toHaveProperty('pagination')
    } else {
      expect(expectErrorShape(response, 413)).toMatchObject({
        error: 'Payload Too Large',
        code: 'payload_too_large',
      })
      expect(response.headers.connection).toBe('close')
      expect(response.headers['cache-control']).toBe('no-store')
      expect(response.headers['x-content-type-options']).toBe('nosniff')
    }
    await normal()
  })

  it('a GET announcing a 100 MB body: 413 at once, without reading the body, and the connection closed', async () => {
    const started = Date.now()
    const outcome = await untilClosed(
      port,
      request(
        [
          'GET /api/public/v1/customers HTTP/1.1',
          `Authorization: Bearer ${key}`,
          'Content-Type: application/json',
          'Content-Length: 100000000',
        ].filter(Boolean),
        '{"a":',
      ).replace('Connection: close\r\n', ''),
      3_000,
    )
    expect(outcome.closedBy).toBe('server')
    expect(outcome.text).toMatch(/^HTTP\/1\.1 413 /)
    expect(outcome.text).toContain('"code":"payload_too_large"')
    expect(Date.now() - started).toBeLessThan(1_500)
    await normal()
  })

  it('tokens up to the 16 KiB header limit are 401 over real HTTP; past it, 431', async () => {
    const at = (token: string) =>
      raw(port, request(['GET /api/public/v1/customers HTTP/1.1', `Authorization: Bearer ${token}`]))
    const long = await at(`${key}${'a'.repeat(8 * 1024)}`)
    expect(expectErrorShape(long, 401)).toEqual({
      error: 'Unauthorized',
      message: 'Invalid or expired API key',
      code: 'invalid_api_key',
    })
    const huge = await at(`${key}${'a'.repeat(20 * 1024)}`)
    expect(expectErrorShape(huge, 431)).toMatchObject({ code: 'header_too_large' })
    await normal()
  })

  it('malformed HTTP (bad Content-Length): 400 in the error shape', async () => {
    const response = await raw(
      port,
      request(['GET /api/public/v1/customers HTTP/1.1', 'Content-Length: abc']),
    )
    expect(expectErrorShape(response, 400)).toMatchObject({ code: 'bad_request' })
    await normal()
  })

  it('two Authorization headers, even both valid: 401 "Invalid or expired API key" (a key was sent) with a challenge', async () => {
    const response = await raw(
      port,
      request([
        'GET /api/public/v1/customers HTTP/1.1',
        `Authorization: Bearer ${key}`,
        `Authorization: Bearer ${key}`,
      ]),
    )
    const body = expectErrorShape(response, 401)
    expect(body).toEqual({
      error: 'Unauthorized',
      message: 'Invalid or expired API key',
      code: 'invalid_api_key',
    })
    expect(response.headers['www-authenticate']).toMatch(/^Bearer /)
    // One header with the same key works on a raw socket too (the control).
    const single = await raw(
      port,
      request(['GET /api/public/v1/customers HTTP/1.1', `Authorization: Bearer ${key}`]),
    )
    expect(single.status).toBe(200)
  })

  it('trailing whitespace after a valid key over real HTTP: spaces and tabs are not part of the value (200); any other is 401', async () => {
    // RFC 9110 5.5: a field value excludes leading and trailing spaces and tabs, so the key is intact.
    const response = await raw(
      port,
      request(['GET /api/public/v1/customers HTTP/1.1', `Authorization: Bearer ${key}   \t`]),
    )
    expect(response.status).toBe(200)
    // A no-break space (byte A0) is part of the value: the token no longer has the key's shape.
    const nbsp = await raw(
      port,
      Buffer.concat([
        Buffer.from(`GET /api/public/v1/customers HTTP/1.1\r\nAuthorization: Bearer ${key}`),
        Buffer.from([0xa0]),
        Buffer.from('\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n'),
      ]),
    )
    expect(expectErrorShape(nbsp, 401)).toEqual({
      error: 'Unauthorized',
      message: 'Invalid or expired API key',
      code: 'invalid_api_key',
    })
  })
})

/**
 * Requests that Node's HTTP parser, its Host rule or Fastify's router refuse, and methods Node
 * hands over apart (CONNECT): every answer is a JSON error with a request id, `no-store` and
 * `nosniff`, and every one is in the request log. One store suffices: none reaches the store.
 */
describe('requests refused before routing, over real HTTP', () => {
  let testStore: TestStore
  let app: FastifyInstance
  let logs: string[]
  let port: number
  let key: string

  beforeAll(async () => {
    testStore = await createTestStore('embedded')
    const org = await createOrg(testStore.store, 'org_refused')
    key = (await createKey(testStore.store, org)).key
    ;({ app, logs } = await buildTestApp(testStore.store))
    port = await listenOnLoopback(app)
  })
  afterAll(async () => {
    await app?.close()
    await testStore?.close()
  })

  /** The request log's line for this response, found by its request id. */
  const logLine = (response: RawResponse) => {
    const id = response.headers['x-request-id']
    expect(id).toMatch(/^req-/)
    const lines = logs
      .map((line) => JSON.parse(line) as Record<string, unknown>)
      .filter((line) => line.msg === 'request' && line.reqId === id)
    expect(lines).toHaveLength(1)
    return lines[0]
  }

  const expectRefused = (response: RawResponse, status: number, code: string) => {
    expect(expectErrorShape(response, status)).toMatchObject({ code })
    expect(response.headers['cache-control']).toBe('no-store')
    expect(response.headers['x-content-type-options']).toBe('nosniff')
    expect(logLine(response)).toMatchObject({ status })
  }

  it('an HTTP/1.1 request without Host: 400 bad_request in the error shape, with a request id, logged', async () => {
    const response = await raw(
      port,
      `GET /api/public/v1/customers HTTP/1.1\r\nAuthorization: Bearer ${key}\r\nConnection: close\r\n\r\n`,
    )
    expectRefused(response, 400, 'bad_request')
    expect(JSON.parse(response.body)).toEqual({
      error: 'Bad Request',
      message: 'An HTTP/1.1 request must carry exactly one Host header',
      code: 'bad_request',
    })
  })

  it('an empty Host or two Host headers: 400 too; HTTP/1.0 needs no Host', async () => {
    const at = (headers: string, version = '1.1') =>
      raw(
        port,
        `GET /api/public/v1/customers HTTP/${version}\r\nAuthorization: Bearer ${key}\r\n${headers}Connection: close\r\n\r\n`,
      )
    expectRefused(await at('Host:\r\n'), 400, 'bad_request')
    expectRefused(await at('Host: 127.0.0.1\r\nHost: evil.example\r\n'), 400, 'bad_request')
    expect((await at('')).status).toBe(400)
    expect((await at('', '1.0')).status).toBe(200)
    expect((await at('Host: 127.0.0.1\r\n')).status).toBe(200)
  })

  it.each(['CONNECT', 'TRACE', 'PROPFIND', 'M-SEARCH', 'QUERY'])(
    '%s on a list path: 405 with Allow: GET, HEAD, logged',
    async (method) => {
      for (const path of ['/api/public/v1/customers', '/openapi.json']) {
        const response = await raw(
          port,
          `${method} ${path} HTTP/1.1\r\nHost: 127.0.0.1\r\nAuthorization: Bearer ${key}\r\n` +
            'Content-Type: application/json\r\nContent-Length: 2\r\nConnection: close\r\n\r\n{}',
        )
        expectRefused(response, 405, 'method_not_allowed')
        expect(response.headers.allow).toBe('GET, HEAD')
      }
    },
  )

  it('CONNECT to a host and port: 404 in the error shape, and the server stays up', async () => {
    const response = await raw(port, 'CONNECT example.com:443 HTTP/1.1\r\nHost: example.com:443\r\n\r\n')
    expectRefused(response, 404, 'not_found')
    const after = await fetch(`http://127.0.0.1:${port}/api/public/v1/customers`, {
      headers: { authorization: `Bearer ${key}` },
    })
    expect(after.status).toBe(200)
  })

  it('a path with invalid percent-encoding: 400 bad_request in the error shape, logged, the path not echoed', async () => {
    const response = await raw(
      port,
      'GET /api/public/v1/customers%ZZ HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n',
    )
    expectRefused(response, 400, 'bad_request')
    expect(response.body).not.toContain('%ZZ')
  })

  it("errors of Node's parser (431, malformed) carry a request id, no-store and nosniff, and are logged", async () => {
    const big = await raw(
      port,
      `GET /api/public/v1/customers HTTP/1.1\r\nHost: 127.0.0.1\r\nX-Big: ${'a'.repeat(17 * 1024)}\r\n\r\n`,
    )
    expectRefused(big, 431, 'header_too_large')
    const malformed = await raw(
      port,
      'GET /api/public/v1/customers HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Length: abc\r\n\r\n',
    )
    expectRefused(malformed, 400, 'bad_request')
  })
})

/**
 * Slow-loris. The built server's deadlines are shortened before it listens (Node reads them at
 * each check, and the check's interval when it starts listening), so that the test takes
 * seconds; the production values are checked separately. One store suffices: the
 * deadlines are Node's HTTP server's, before any request reaches the store.
 */
describe('slow clients over real HTTP', () => {
  const SHORT = { headersMs: 1_000, requestMs: 2_000, checkEveryMs: 200 }
  let testStore: TestStore
  let app: FastifyInstance
  let port: number
  let key: string

  beforeAll(async () => {
    testStore = await createTestStore('embedded')
    const org = await createOrg(testStore.store, 'org_slow')
    key = (await createKey(testStore.store, org)).key
    app = await buildApp({
      store: testStore.store,
      config: { apiKeyBrand: BRAND, logLevel: 'silent' },
    })
    const server = app.server as typeof app.server & { connectionsCheckingInterval: number }
    server.headersTimeout = SHORT.headersMs
    server.requestTimeout = SHORT.requestMs
    server.connectionsCheckingInterval = SHORT.checkEveryMs
    port = await listenOnLoopback(app)
  })
  afterAll(async () => {
    await app?.close()
    await testStore?.close()
  })

  it('production deadlines: headers 5 s, whole request 10 s, checked every 1 s; 16 KiB of headers', async () => {
    const production = await buildApp({
      store: testStore.store,
      config: { apiKeyBrand: BRAND, logLevel: 'silent' },
    })
    try {
      const server = production.server as typeof production.server & { connectionsCheckingInterval: number }
      expect({
        headersTimeout: server.headersTimeout,
        requestTimeout: server.requestTimeout,
        connectionsCheckingInterval: server.connectionsCheckingInterval,
        keepAliveTimeout: server.keepAliveTimeout,
        idleSocketTimeout: server.timeout,
        maxHeaderSize: (server as { maxHeaderSize?: number }).maxHeaderSize ?? httpMaxHeaderSize,
      }).toEqual({
        headersTimeout: 5_000,
        requestTimeout: 10_000,
        connectionsCheckingInterval: 1_000,
        keepAliveTimeout: 5_000,
        idleSocketTimeout: 15_000,
        maxHeaderSize: 16_384,
      })
    } finally {
      await production.close()
    }
  })

  it('20 clients dribbling headers byte by byte are cut at the header deadline while normal requests succeed', async () => {
    const line =
      'GET /api/public/v1/customers HTTP/1.1\r\nHost: 127.0.0.1\r\nAuthorization: Bearer x\r\nX-Slow: '
    interface Slow {
      readonly socket: Socket
      readonly opened: number
      closedAfter?: number
      text: string
    }
    const slow: Slow[] = []
    for (let i = 0; i < 20; i++) {
      const entry: Slow = { socket: connect(port, '127.0.0.1'), opened: Date.now(), text: '' }
      entry.socket.on('error', () => {})
      entry.socket.on('data', (chunk) => {
        entry.text += chunk.toString()
      })
      entry.socket.on('close', () => {
        entry.closedAfter = Date.now() - entry.opened
      })
      slow.push(entry)
    }
    let sent = 0
    const dribble = setInterval(() => {
      for (const { socket } of slow) if (!socket.destroyed) socket.write(line[sent % line.length] ?? 'a')
      sent++
    }, 100)
    const normal = async () => {
      const t0 = Date.now()
      const response = await fetch(`http://127.0.0.1:${port}/api/public/v1/customers`, {
        headers: { authorization: `Bearer ${key}` },
      })
      await response.json()
      return { status: response.status, ms: Date.now() - t0 }
    }
    const results: { status: number; ms: number; sentAfter: number }[] = []
    const started = Date.now()
    try {
      // Bounded: 3 s of normal traffic, by which time every slow client must have been cut. How
      // many requests fit in the window depends on the machine's load, not on the rule.
      while (Date.now() - started < 3_000) {
        const sentAfter = Date.now() - started
        results.push(...(await Promise.all([normal(), normal()])).map((r) => ({ ...r, sentAfter })))
        await new Promise((r) => setTimeout(r, 50))
      }
    } finally {
      clearInterval(dribble)
      for (const { socket } of slow) socket.destroy()
    }
    const cut = slow.map((s) => s.closedAfter ?? Number.POSITIVE_INFINITY)
    const slowest = Math.max(...results.map((r) => r.ms))
    console.log(
      `[http] 20 slow clients (header deadline ${SHORT.headersMs} ms, checked every ${SHORT.checkEveryMs} ms): ` +
        `cut after ${Math.min(...cut)}-${Math.max(...cut)} ms having sent ${sent} bytes at most; ` +
        `${results.length} normal requests meanwhile, all ${[...new Set(results.map((r) => r.status))].join(',')}, ` +
        `slowest ${slowest} ms`,
    )
    // The rule: every normal request is answered 200, those sent while the slow clients still
    // held their connections too, and each slow client is cut by the deadline (below).
    expect(results.every((r) => r.status === 200)).toBe(true)
    expect(results.filter((r) => r.sentAfter < Math.min(...cut)).length).toBeGreaterThan(0)
    for (const entry of slow) {
      // Closed by the server (the test destroys them only after 3 s), soon after the deadline...
      expect(entry.closedAfter).toBeGreaterThanOrEqual(SHORT.headersMs - 100)
      expect(entry.closedAfter).toBeLessThan(SHORT.headersMs + SHORT.checkEveryMs + 700)
      // ...with a JSON 400 that says why.
      expect(entry.text).toMatch(/^HTTP\/1\.1 400 /)
      expect(JSON.parse(entry.text.slice(entry.text.indexOf('\r\n\r\n') + 4))).toEqual({
        error: 'Bad Request',
        message: 'Request not received in time',
        code: 'bad_request',
      })
    }
  })

  it('silent connections and a body dribbled after the headers are cut too', async () => {
    const silent = untilClosed(port, '', 4_000)
    const slowBody = new Promise<Closed>((resolve) => {
      const started = Date.now()
      const socket = connect(port, '127.0.0.1')
      let text = ''
      socket.on('error', () => {})
      socket.on('data', (chunk) => {
        text += chunk.toString()
      })
      const timer = setInterval(() => socket.writable && socket.write('x'), 100)
      const stop = setTimeout(() => {
        clearInterval(timer)
        socket.destroy()
        resolve({ text, closedBy: 'timeout', ms: Date.now() - started })
      }, 4_000)
      socket.on('close', () => {
        clearInterval(timer)
        clearTimeout(stop)
        resolve({ text, closedBy: 'server', ms: Date.now() - started })
      })
      socket.write(
        'GET /openapi.json HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: text/plain\r\nContent-Length: 1000\r\n\r\n',
      )
    })
    const [quiet, body] = await Promise.all([silent, slowBody])
    console.log(
      `[http] a silent connection closed by the ${quiet.closedBy} after ${quiet.ms} ms; ` +
        `a dribbled body closed by the ${body.closedBy} after ${body.ms} ms`,
    )
    expect(quiet.closedBy).toBe('server')
    expect(quiet.ms).toBeLessThan(SHORT.headersMs + SHORT.checkEveryMs + 700)
    expect(body.closedBy).toBe('server')
    // The request was answered once, normally; nothing was written after that answer.
    expect(body.text).toMatch(/^HTTP\/1\.1 200 /)
    // One status line (the document itself mentions "HTTP/1.1 request" in an example).
    expect(body.text.match(/HTTP\/1\.1 \d{3} /g)).toHaveLength(1)
    expect(body.ms).toBeLessThan(SHORT.requestMs + SHORT.checkEveryMs + 700)
  })
})
