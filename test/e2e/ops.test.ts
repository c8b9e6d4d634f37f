import { setTimeout as sleep } from 'node:timers/promises'
import { afterAll, describe, expect, it } from 'vitest'
import { cleanEnv, freePort, start } from '../helpers/process.js'
import {
  createTestDatabase,
  describeEachStoreKind,
  migratedDataDir,
  type TestDatabase,
} from '../helpers/stores.js'

const cleanups: (() => Promise<void> | void)[] = []
afterAll(async () => {
  for (const cleanup of cleanups.reverse()) await cleanup()
})

/** A migrated DATA_DIR: the server's first start (PGlite's initdb) is another test's. */
async function embeddedEnv(): Promise<Record<string, string>> {
  const { dir, remove } = migratedDataDir()
  cleanups.push(remove)
  return { DATA_DIR: dir }
}

async function postgresEnv(): Promise<Record<string, string>> {
  const database: TestDatabase = await createTestDatabase({ migrated: true })
  cleanups.push(() => database.drop())
  return { DATABASE_URL: database.url }
}

const ENV = { embedded: embeddedEnv, postgres: postgresEnv }

describeEachStoreKind('the server binary on %s: the ops port', (kind) => {
  const makeEnv = ENV[kind]
  it('serves healthz, readyz and metrics on its own port; on SIGTERM readyz turns 503 while requests are still served', async () => {
    const port = await freePort()
    const opsPort = await freePort()
    const server = start(
      'node',
      ['dist/server.js'],
      cleanEnv({
        ...(await makeEnv()),
        PORT: String(port),
        OPS_PORT: String(opsPort),
        SHUTDOWN_DELAY_MS: '2000',
      }),
    )
    let stopping = false
    try {
      await server.waitFor(/operations listener/)
      const ops = (path: string) => fetch(`http://127.0.0.1:${opsPort}${path}`)
      expect(await (await ops('/healthz')).json()).toEqual({ status: 'ok' })
      expect((await ops('/readyz')).status).toBe(200)
      await fetch(`http://127.0.0.1:${port}/api/public/v1/customers`)
      const text = await (await ops('/metrics')).text()
      expect(text).toMatch(
        /openbook_http_requests_total\{route="\/api\/public\/v1\/customers",method="GET",status="401"\} 1/,
      )
      expect(text).toMatch(/openbook_build_info\{version="[^"]+",contract="1\.0\.0"\} 1/)
      // The public port has none of it.
      expect((await fetch(`http://127.0.0.1:${port}/readyz`)).status).toBe(404)

      stopping = true
      server.child.kill('SIGTERM')
      await server.waitFor(/shutting down/)
      expect((await ops('/readyz')).status).toBe(503)
      // Readiness is off, the listener still open: a request that arrives now is answered.
      const during = await fetch(`http://127.0.0.1:${port}/api/public/v1/customers`)
      expect(during.status).toBe(401)
      await sleep(100)
    } finally {
      // A second signal would make close-with-grace exit at once, with 1.
      if (!stopping) server.child.kill('SIGTERM')
    }
    expect(await server.exited(), server.output()).toBe(0)
  }, 60_000)
})

describe('ops settings', () => {
  it('a bad OPS_PORT stops the server with one line naming it', async () => {
    const server = start('node', ['dist/server.js'], cleanEnv({ ...(await embeddedEnv()), OPS_PORT: 'x' }))
    expect(await server.exited()).toBe(1)
    expect(server.output().trim()).toBe('openbook: invalid OPS_PORT: must be a port number')
  })
})
