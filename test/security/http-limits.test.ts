import { connect, type Socket } from 'node:net'
import type { FastifyInstance } from 'fastify'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { buildTestApp } from '../helpers/app.js'
import { createKey, createOrg } from '../helpers/fixtures.js'
import { createTestStore, postgresAvailable, STORE_KINDS, type TestStore } from '../helpers/stores.js'

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

const ERROR_KEYS = ['code', 'details', 'error', 'message']
function expectErrorShape(response: RawResponse, status: number) {
  expect(response.status).toBe(status)
  expect(response.headers['content-type']).toMatch(/^application\/json/)
  const body = JSON.parse(response.body) as Record<string, unknown>
  expect(typeof body.error).toBe('string')
  for (const key of Object.keys(body)) expect(ERROR_KEYS).toContain(key)
  return body
}

describe.each(STORE_KINDS)('limits over real HTTP on %s', (kind) => {
  describe.skipIf(kind === 'postgres' && !postgresAvailable())('', () => {
    let testStore: TestStore
    let app: FastifyInstance
    let port: number
    let key: string

    beforeAll(async () => {
      testStore = await createTestStore(kind)
      const org = await createOrg(testStore.store, 'org_http')
      key = (await createKey(testStore.store, org)).key
      ;({ app } = await buildTestApp(testStore.store, { logLevel: 'silent' }))
      await app.listen({ port: 0, host: '127.0.0.1' })
      const address = app.server.address()
      port = typeof address === 'object' && address ? address.port : 0
    })
    afterAll(async () => {
      await app?.close()
      await testStore?.close()
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
      ['a small JSON body', ['Content-Type: application/json', 'Content-Length: 13'], '{"limit":100}'],
      ['a text body', ['Content-Type: text/plain', 'Content-Length: 5'], 'hello'],
      [
        'a body over the 1 KiB limit',
        ['Content-Type: application/json', 'Content-Length: 4000'],
        `"${'x'.repeat(3998)}"`,
      ],
      [
        'a chunked body',
        ['Content-Type: application/json', 'Transfer-Encoding: chunked'],
        '2\r\n{}\r\n0\r\n\r\n',
      ],
      ['an unknown content type', ['Content-Type: application/x-evil', 'Content-Length: 3'], 'abc'],
    ])('a GET with %s: a normal 200 or a JSON error, never 5xx', async (_label, headers, body) => {
      const response = await raw(
        port,
        request(['GET /api/public/v1/customers HTTP/1.1', `Authorization: Bearer ${key}`, ...headers], body),
      )
      console.log(`[http ${kind}] GET with ${_label}: ${response.status}`)
      expect(response.status).toBeLessThan(500)
      expect(response.headers['content-type']).toMatch(/^application\/json/)
      const parsed = JSON.parse(response.body) as Record<string, unknown>
      if (response.status === 200) expect(parsed).toHaveProperty('pagination')
      else expectErrorShape(response, response.status)
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

    it('two Authorization headers, even both valid: 401 "API key required" with a challenge', async () => {
      const response = await raw(
        port,
        request([
          'GET /api/public/v1/customers HTTP/1.1',
          `Authorization: Bearer ${key}`,
          `Authorization: Bearer ${key}`,
        ]),
      )
      const body = expectErrorShape(response, 401)
      expect(body).toMatchObject({
        error: 'Unauthorized',
        message: 'API key required in Authorization header',
      })
      expect(response.headers['www-authenticate']).toMatch(/^Bearer /)
      // One header with the same key works on a raw socket too (the control).
      const single = await raw(
        port,
        request(['GET /api/public/v1/customers HTTP/1.1', `Authorization: Bearer ${key}`]),
      )
      expect(single.status).toBe(200)
    })

    it('trailing whitespace after a valid key over real HTTP: the header value is trimmed, 200', async () => {
      const response = await raw(
        port,
        request(['GET /api/public/v1/customers HTTP/1.1', `Authorization: Bearer ${key}   \t`]),
      )
      expect(response.status).toBe(200)
    })

    it.skipIf(kind !== 'embedded')(
      '20 slow clients dribbling headers do not stop normal requests',
      async () => {
        const sockets: Socket[] = []
        const line = 'GET /api/public/v1/customers HTTP/1.1\r\nHost: 127.0.0.1\r\nX-Slow: '
        let sent = 0
        for (let i = 0; i < 20; i++) {
          const socket = connect(port, '127.0.0.1')
          socket.on('error', () => {})
          sockets.push(socket)
        }
        const dribble = setInterval(() => {
          for (const socket of sockets) {
            if (!socket.destroyed) socket.write(line[sent % line.length] ?? 'a')
          }
          sent++
        }, 100)
        try {
          const started = Date.now()
          const durations: number[] = []
          while (Date.now() - started < 3_000) {
            const t0 = Date.now()
            await Promise.all([normal(), normal()])
            durations.push(Date.now() - t0)
            await new Promise((r) => setTimeout(r, 100))
          }
          console.log(
            `[http ${kind}] 20 slow clients for 3 s: ${durations.length * 2} normal requests, slowest ${Math.max(...durations)} ms`,
          )
          expect(durations.length).toBeGreaterThan(10)
          expect(Math.max(...durations)).toBeLessThan(1_000)
          expect(sockets.every((s) => !s.destroyed)).toBe(true) // they really were held open during the test
        } finally {
          clearInterval(dribble)
          for (const socket of sockets) socket.destroy()
        }
      },
    )
  })
})
