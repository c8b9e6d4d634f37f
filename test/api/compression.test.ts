import { request } from 'node:http'
import { brotliDecompressSync, gunzipSync } from 'node:zlib'
import type { FastifyInstance } from 'fastify'
import { afterAll, beforeAll, expect, it } from 'vitest'
import { buildTestApp, listenOnLoopback } from '../helpers/app.js'
import { addCustomers, createKey, createOrg } from '../helpers/fixtures.js'
import { describeEachStore } from '../helpers/stores.js'

/**
 * Compressed answers, over real HTTP: the bytes as they leave the server,
 * decoded here, never by a client that might hide a wrong encoding.
 */

interface Raw {
  status: number
  headers: Record<string, string | string[] | undefined>
  body: Buffer
}

function get(port: number, path: string, headers: Record<string, string>): Promise<Raw> {
  return new Promise((resolve, reject) => {
    const req = request({ host: '127.0.0.1', port, path, headers }, (res) => {
      const chunks: Buffer[] = []
      res.on('data', (chunk: Buffer) => chunks.push(chunk))
      res.on('end', () =>
        resolve({ status: res.statusCode ?? 0, headers: res.headers, body: Buffer.concat(chunks) }),
      )
      res.on('error', reject)
    })
    req.on('error', reject)
    req.end()
  })
}

/** The body as the client reads it once it undoes Content-Encoding. */
function decoded(raw: Raw): string {
  const encoding = raw.headers['content-encoding']
  if (encoding === 'gzip') return gunzipSync(raw.body).toString('utf8')
  if (encoding === 'br') return brotliDecompressSync(raw.body).toString('utf8')
  expect(encoding).toBeUndefined()
  return raw.body.toString('utf8')
}

const varies = (raw: Raw) =>
  String(raw.headers.vary ?? '')
    .toLowerCase()
    .includes('accept-encoding')

describeEachStore('compressed answers on %s', (testStore) => {
  let app: FastifyInstance
  let port: number
  let key: string

  beforeAll(async () => {
    const org = await createOrg(testStore.store, 'org_gzip')
    await addCustomers(
      testStore.store,
      org.id,
      Array.from({ length: 120 }, (_, n) => ({
        id: `cus_${String(n).padStart(4, '0')}`,
        createdAt: new Date(Date.UTC(2025, 0, 1) + n * 3_600_000).toISOString(),
        firstName: `First${n}`,
        lastName: `Last${n}`,
        email: `person${n}@example.com`,
        city: n % 2 ? 'Lyon' : 'Leeds',
      })),
    )
    key = (await createKey(testStore.store, org)).key
    ;({ app } = await buildTestApp(testStore.store, { logLevel: 'silent' }))
    port = await listenOnLoopback(app)
  })

  afterAll(async () => {
    await app?.close()
  })

  const auth = () => ({ authorization: `Bearer ${key}` })

  it.each(['gzip', 'br'])(
    'a page asked for with %s comes so, and decodes to exactly the uncompressed page',
    async (encoding) => {
      for (const path of [
        '/api/public/v1/customers?limit=100',
        '/api/public/v1/customers?limit=100&offset=20',
      ]) {
        const plain = await get(port, path, auth())
        const compressed = await get(port, path, { ...auth(), 'accept-encoding': encoding })
        expect(plain.status).toBe(200)
        expect(compressed.status).toBe(200)
        expect(compressed.headers['content-encoding']).toBe(encoding)
        expect(varies(compressed)).toBe(true)
        expect(decoded(compressed)).toBe(plain.body.toString('utf8'))
        // Worth it: a page of 100 is at least 3 times smaller on the wire.
        expect(compressed.body.length * 3).toBeLessThan(plain.body.length)
        // Compressed in one piece: its length said up front, not sent in chunks.
        expect(compressed.headers['transfer-encoding']).toBeUndefined()
        expect(compressed.headers['content-length']).toBe(String(compressed.body.length))
        expect(JSON.parse(decoded(compressed)).data).toHaveLength(100)
      }
    },
  )

  it("follows the client's preference and q-values: gzip when br is refused, none for identity or q=0", async () => {
    const path = '/api/public/v1/customers?limit=100'
    const cases: [string | undefined, string | undefined][] = [
      [undefined, undefined],
      ['identity', undefined],
      ['gzip;q=0', undefined],
      ['deflate', undefined],
      ['gzip, deflate', 'gzip'],
      ['br;q=0, gzip', 'gzip'],
      ['gzip, deflate, br', 'br'],
    ]
    for (const [accept, expected] of cases) {
      const raw = await get(port, path, {
        ...auth(),
        ...(accept === undefined ? {} : { 'accept-encoding': accept }),
      })
      expect(raw.status, String(accept)).toBe(200)
      expect(raw.headers['content-encoding'], String(accept)).toBe(expected)
      // Said on the uncompressed answer too: the answer varies by Accept-Encoding.
      expect(varies(raw), String(accept)).toBe(true)
      expect(JSON.parse(decoded(raw)).data, String(accept)).toHaveLength(100)
    }
  })

  it('error answers stay correct JSON of the error shape when compression is asked for', async () => {
    const cases: [string, Record<string, string>, number, string][] = [
      ['/api/public/v1/customers', {}, 401, 'missing_api_key'],
      [
        '/api/public/v1/customers',
        { authorization: `Bearer svc_test_${'ab'.repeat(32)}` },
        401,
        'invalid_api_key',
      ],
      ['/api/public/v1/customers?limit=1000', auth(), 400, 'invalid_query'],
      ['/api/public/v1/nothing', auth(), 404, 'not_found'],
    ]
    for (const [path, headers, status, code] of cases) {
      for (const encoding of ['gzip', 'br']) {
        const raw = await get(port, path, { ...headers, 'accept-encoding': encoding })
        expect(raw.status, path).toBe(status)
        const body = JSON.parse(decoded(raw))
        expect(body, path).toMatchObject({ code })
        expect(typeof body.error).toBe('string')
        expect(raw.headers['x-request-id']).toMatch(/^req-/)
      }
    }
  })

  it('/openapi.json is compressed too, and decodes to the document', async () => {
    const plain = await get(port, '/openapi.json', {})
    const compressed = await get(port, '/openapi.json', { 'accept-encoding': 'gzip' })
    expect(compressed.headers['content-encoding']).toBe('gzip')
    expect(decoded(compressed)).toBe(plain.body.toString('utf8'))
    expect(varies(plain)).toBe(true)
  })
})
