import { mkdtempSync, rmSync } from 'node:fs'
import { createServer, request } from 'node:http'
import type { AddressInfo } from 'node:net'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { AuthenticationError, KeyExpiredError, KeyRevokedError, Openbook } from '../src/index.js'
import { createDatabase, hasPostgres, type TestDatabase } from './helpers/postgres.js'
import { type Salon, setUpSalon } from './helpers/salons.js'
import { type ServerProcess, startPostgresServer } from './helpers/server.js'
import { sync } from './helpers/sync.js'

/**
 * An expired or revoked key is told apart from a wrong one (the message stays
 * the contract's), and every answer to an expiring key gives its expiry, which the client hands on
 * (`keyExpiresAt`) and openbook-sync warns about. A real server on PostgreSQL; keys made with the
 * operator CLI, as an organization's owner makes them.
 */

const SALON: Salon = { org: 'org_key_state', customers: 30, appointments: 10, key: '' }
const OWNER = 'owner@org-key-state.test'

let database: TestDatabase
let server: ServerProcess
let directory: string

beforeAll(async () => {
  if (!hasPostgres) return
  database = await createDatabase('openbook_key_state')
  server = await startPostgresServer(database.url)
  await setUpSalon(server, SALON)
  directory = mkdtempSync(join(tmpdir(), 'openbook-key-state-'))
}, 180_000)

afterAll(async () => {
  await server?.stop()
  if (directory) rmSync(directory, { recursive: true, force: true })
  await database?.drop()
})

async function createKey(...expiry: string[]): Promise<{ id: string; key: string }> {
  const out = await server.cli([
    'keys',
    'create',
    '--org',
    SALON.org,
    '--as',
    OWNER,
    '--env',
    'test',
    '--json',
    ...expiry,
  ])
  return JSON.parse(out) as { id: string; key: string }
}

const client = (apiKey: string) => new Openbook({ apiKey, baseUrl: server.baseUrl, retry: false })
const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms))

describe.skipIf(!hasPostgres)('key expiry and revocation, against a server on PostgreSQL', () => {
  it('pages carry the expiry of an expiring key, and none for a key without one', async () => {
    const expiring = await createKey('--expires-in', '10d')
    const before = Date.now()
    const page = await client(expiring.key).customers.list({ limit: 2 })
    expect(page.keyExpiresAt).toBeInstanceOf(Date)
    // The header is an HTTP-date: whole seconds.
    const expected = before + 10 * 86_400_000
    expect(Math.abs((page.keyExpiresAt?.getTime() ?? 0) - expected)).toBeLessThan(60_000)
    const pages = client(expiring.key).appointments.all({}, { pageSize: 5 }).pages()
    const first = await pages.next()
    expect(first.value?.keyExpiresAt?.getTime()).toBe(page.keyExpiresAt?.getTime())
    await pages.return(undefined)
    expect((await client(SALON.key).customers.list({ limit: 1 })).keyExpiresAt).toBeUndefined()
  })

  it('openbook-sync warns once when the key expires within 30 days, and not otherwise', async () => {
    const soon = await createKey('--expires-in', '10d')
    const later = await createKey('--expires-in', '90d')
    const run = (key: string, out: string) =>
      sync(['customers', '--base-url', server.baseUrl, '--out', join(directory, out), '--key-env', 'KEY'], {
        env: { KEY: key },
      }).done
    const warned = await run(soon.key, 'soon.ndjson')
    expect(warned.code, warned.stderr).toBe(0)
    expect(warned.stderr.match(/warning: the API key expires at \S+ \(in 9 days\)/g)).toHaveLength(1)
    for (const key of [later.key, SALON.key]) {
      const quiet = await run(key, `quiet-${key.slice(-6)}.ndjson`)
      expect(quiet.code, quiet.stderr).toBe(0)
      expect(quiet.stderr).not.toContain('expires')
    }
  }, 60_000)

  it('an expired key is a KeyExpiredError (expired_api_key), a revoked one a KeyRevokedError, an unknown one neither', async () => {
    const expiring = await createKey('--expires-in', '3s')
    expect((await client(expiring.key).customers.list({ limit: 1 })).data).toHaveLength(1)
    await sleep(3_500)
    const expired = await client(expiring.key)
      .customers.list()
      .catch((error: unknown) => error)
    expect(expired).toBeInstanceOf(KeyExpiredError)
    expect(expired).toMatchObject({
      status: 401,
      message: 'Invalid or expired API key',
      code: 'expired_api_key',
    })

    const revokedKey = await createKey()
    await server.cli(['keys', 'revoke', revokedKey.id])
    const revoked = await client(revokedKey.key)
      .appointments.list()
      .catch((error: unknown) => error)
    expect(revoked).toBeInstanceOf(KeyRevokedError)
    expect(revoked).toMatchObject({
      status: 401,
      message: 'Invalid or expired API key',
      code: 'revoked_api_key',
    })

    const unknown = await client(`svc_test_${'5'.repeat(64)}`)
      .customers.list()
      .catch((error: unknown) => error)
    expect(unknown).toBeInstanceOf(AuthenticationError)
    expect(unknown).not.toBeInstanceOf(KeyExpiredError)
    expect(unknown).not.toBeInstanceOf(KeyRevokedError)
    expect(unknown).toMatchObject({ code: 'invalid_api_key' })

    // openbook-sync: a key to fix, exit 3, saying why.
    const result = await sync(
      [
        'customers',
        '--base-url',
        server.baseUrl,
        '--out',
        join(directory, 'expired.ndjson'),
        '--key-env',
        'KEY',
      ],
      { env: { KEY: expiring.key } },
    ).done
    expect(result.code).toBe(3)
    expect(result.stderr).toContain('Invalid or expired API key')
    expect(result.stderr).toContain('expired_api_key')
  }, 60_000)
})

describe.skipIf(!hasPostgres)('compressed pages, against a server on PostgreSQL', () => {
  it('the client asks for them, gets them compressed, and reads them as the uncompressed pages', async () => {
    // A proxy in between sees the bytes on the wire.
    const seen: { encoding: string | undefined; bytes: number }[] = []
    const target = new URL(server.baseUrl)
    const proxy = createServer((incoming, outgoing) => {
      const upstream = request(
        { host: target.hostname, port: target.port, path: incoming.url, headers: incoming.headers },
        (answer) => {
          let bytes = 0
          answer.on('data', (chunk: Buffer) => {
            bytes += chunk.length
          })
          answer.on('end', () => seen.push({ encoding: answer.headers['content-encoding'], bytes }))
          outgoing.writeHead(answer.statusCode ?? 502, answer.headers)
          answer.pipe(outgoing)
        },
      )
      incoming.pipe(upstream)
    })
    await new Promise<void>((resolve) => proxy.listen(0, '127.0.0.1', resolve))
    try {
      const through = new Openbook({
        apiKey: SALON.key,
        baseUrl: `http://127.0.0.1:${(proxy.address() as AddressInfo).port}`,
        retry: false,
      })
      const compressed = await through.customers.list({ limit: 100 })
      const plain = await fetch(`${server.baseUrl}/api/public/v1/customers?limit=100`, {
        headers: { authorization: `Bearer ${SALON.key}`, 'accept-encoding': 'identity' },
      })
      const plainText = await plain.text()
      expect(plain.headers.get('content-encoding')).toBeNull()
      expect(seen).toHaveLength(1)
      expect(seen[0]?.encoding).toBe('br')
      expect((seen[0]?.bytes ?? 0) * 3).toBeLessThan(Buffer.byteLength(plainText))
      const { requestId: _id, keyExpiresAt: _expiry, organizationId, etag, ...body } = compressed
      expect(organizationId).toBe(SALON.org)
      expect(body).toEqual(JSON.parse(plainText))
      // Each coding is its own representation, with its own tag.
      expect(etag).toMatch(/^"\d+-[A-Za-z0-9_-]{22}"$/)
      expect(etag).not.toBe(plain.headers.get('etag'))
      expect(compressed.data).toHaveLength(SALON.customers)
    } finally {
      proxy.close()
    }
  })
})
