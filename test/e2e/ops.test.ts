import { existsSync } from 'node:fs'
import { createServer, type Server } from 'node:net'
import { join } from 'node:path'
import { setTimeout as sleep } from 'node:timers/promises'
import { afterAll, describe, expect, it } from 'vitest'
import { patience } from '../../packages/client/test/helpers/patience.js'
import { cleanEnv, freePort, scratchRoot, start } from '../helpers/process.js'
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
  it(
    'serves healthz, readyz and metrics on its own port; on SIGTERM readyz turns 503 while requests are still served',
    async () => {
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
          LIST_FOLD_INTERVAL_MS: '200',
        }),
      )
      let stopping = false
      try {
        await server.waitFor(/operations listener \(healthz, readyz, metrics\) ready/)
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
        // On PostgreSQL the server folds the lists in the background and says what it saw; the
        // embedded store has no writer beside openbook, and no fold to report.
        if (kind === 'postgres') {
          const since = Date.now()
          while (!/^openbook_list_pending_changes 0$/m.test(await (await ops('/metrics')).text())) {
            expect(Date.now() - since).toBeLessThan(patience(10_000))
            await sleep(100)
          }
        } else {
          expect(text).not.toMatch(/openbook_list_/)
        }

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
    },
    patience(60_000),
  )
})

describe('ops settings', () => {
  it('a bad OPS_PORT stops the server with one line naming it', async () => {
    const server = start('node', ['dist/server.js'], cleanEnv({ ...(await embeddedEnv()), OPS_PORT: 'x' }))
    expect(await server.exited()).toBe(1)
    expect(server.output().trim()).toBe('openbook: invalid OPS_PORT: must be a port number')
  })
})

/** Holds host:port, as another server would; resolves to undefined when something holds it already. */
function occupy(port: number, host = '127.0.0.1'): Promise<Server | undefined> {
  return new Promise((resolve, reject) => {
    const server = createServer()
    server.once('error', (error: NodeJS.ErrnoException) =>
      error.code === 'EADDRINUSE' ? resolve(undefined) : reject(error),
    )
    server.listen(port, host, () => resolve(server))
  })
}

const release = (server: Server | undefined) =>
  new Promise<void>((resolve) => (server ? server.close(() => resolve()) : resolve()))

describeEachStoreKind('port clashes on %s: every one names its variable', (kind) => {
  const makeEnv = ENV[kind]
  /** A DATA_DIR that does not exist: a server that stops before its set-up never creates it. */
  const untouched = () =>
    join(scratchRoot(), `openbook-ports-${process.pid}-${Math.random().toString(36).slice(2)}`)
  const envFor = async () => (kind === 'embedded' ? { DATA_DIR: untouched() } : await makeEnv())

  it(
    'OPS_PORT unset and its default (9464) taken: one warning line, and the operations listener moves to a free port',
    async () => {
      // Another local server has the default, as a second `npm start` finds it (or this test holds it).
      const holder = await occupy(9464)
      try {
        const port = await freePort()
        const server = start(
          'node',
          ['dist/server.js'],
          // An empty variable is unset (cleanEnv sets OPS_PORT=0 for every other test).
          cleanEnv({
            ...(kind === 'embedded' ? await embeddedEnv() : await makeEnv()),
            PORT: String(port),
            OPS_PORT: '',
          }),
        )
        try {
          await server.waitFor(/operations listener \(healthz, readyz, metrics\) ready/)
          const warnings = server
            .output()
            .split('\n')
            .filter((line) => line.includes('9464'))
          expect(warnings).toHaveLength(1)
          const warning = JSON.parse(warnings[0] ?? '{}') as { level: number; msg: string; opsPort: number }
          expect(warning.level).toBe(40)
          expect(warning.msg).toMatch(
            /^OPS_PORT 9464 is in use: the operations listener \(healthz, readyz, metrics\) is on 127\.0\.0\.1:\d+ instead; set OPS_PORT to choose its port$/,
          )
          expect(warning.opsPort).not.toBe(9464)
          expect((await fetch(`http://127.0.0.1:${warning.opsPort}/healthz`)).status).toBe(200)
          expect((await fetch(`http://127.0.0.1:${warning.opsPort}/readyz`)).status).toBe(200)
          expect((await fetch(`http://127.0.0.1:${port}/openapi.json`)).status).toBe(200)
        } finally {
          server.child.kill('SIGTERM')
        }
        expect(await server.exited(), server.output()).toBe(0)
      } finally {
        await release(holder)
      }
    },
    patience(60_000),
  )

  it('OPS_PORT set and taken stops the server before any set-up, in one line naming OPS_PORT', async () => {
    const opsPort = await freePort()
    const holder = await occupy(opsPort)
    try {
      const env = await envFor()
      const server = start(
        'node',
        ['dist/server.js'],
        cleanEnv({ ...env, PORT: String(await freePort()), OPS_PORT: String(opsPort) }),
      )
      expect(await server.exited()).toBe(1)
      expect(server.output()).toBe(
        `openbook: OPS_PORT ${opsPort} is in use (127.0.0.1:${opsPort}): stop what listens there, or set OPS_PORT to a free port\n`,
      )
      if ('DATA_DIR' in env) expect(existsSync(String(env.DATA_DIR))).toBe(false)
    } finally {
      await release(holder)
    }
  })

  it('PORT taken stops the server before any set-up, in one line naming PORT', async () => {
    const port = await freePort()
    const holder = await occupy(port)
    try {
      const env = await envFor()
      const server = start('node', ['dist/server.js'], cleanEnv({ ...env, PORT: String(port) }))
      expect(await server.exited()).toBe(1)
      expect(server.output()).toBe(
        `openbook: PORT ${port} is in use (127.0.0.1:${port}): stop what listens there, or set PORT to a free port\n`,
      )
      if ('DATA_DIR' in env) expect(existsSync(String(env.DATA_DIR))).toBe(false)
    } finally {
      await release(holder)
    }
  })

  it('OPS_PORT equal to PORT stops the server in one line', async () => {
    const port = await freePort()
    const server = start(
      'node',
      ['dist/server.js'],
      cleanEnv({ ...(await envFor()), PORT: String(port), OPS_PORT: String(port) }),
    )
    expect(await server.exited()).toBe(1)
    expect(server.output()).toBe(
      `openbook: OPS_PORT equals PORT (${port}): the operations listener needs a port of its own; set OPS_PORT to another port\n`,
    )
  })
})
