import { execFile } from 'node:child_process'
import { mkdtempSync, rmSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { promisify } from 'node:util'
import { afterAll, describe, expect, it } from 'vitest'
import { patience } from '../../packages/client/test/helpers/patience.js'
import { createPostgresStore } from '../../src/store/postgres/postgres.js'
import { migrate } from '../../src/store/schema/migrate.js'
import { cleanEnv, freePort, start } from '../helpers/process.js'
import { createTestDatabase, migratedDataDir, postgresAvailable } from '../helpers/stores.js'

const exec = promisify(execFile)
const dirs: string[] = []
const tempDir = () => {
  const dir = mkdtempSync(join(tmpdir(), 'openbook-e2e-'))
  dirs.push(dir)
  return dir
}

afterAll(() => {
  for (const dir of dirs) rmSync(dir, { recursive: true, force: true })
})

describe('the server process, embedded store', () => {
  it(
    'first start seeds a demo and prints a curl line that works as printed; SIGTERM exits 0',
    async () => {
      const dataDir = tempDir()
      const port = await freePort()
      const server = start('node', ['dist/server.js'], cleanEnv({ DATA_DIR: dataDir, PORT: String(port) }))
      try {
        const curlLine = await server.waitFor(/curl -H "Authorization: Bearer svc_test_[0-9a-f]{64}" "[^"]+"/)
        await server.waitFor(/Server listening/)
        // DATA_DIR is a copy of the template the build made, not PGlite's initdb (embedded-template.ts).
        expect(server.output()).toContain(`set-up: DATA_DIR (${dataDir}) made from the template`)
        const { stdout } = await exec('sh', ['-c', curlLine])
        const body = JSON.parse(stdout)
        expect(body.data.length).toBeGreaterThan(0)
        expect(body.pagination.total).toBeGreaterThanOrEqual(200)
        const appointments = await fetch(`http://127.0.0.1:${port}/api/public/v1/appointments?limit=100`, {
          headers: { authorization: `Bearer ${/svc_test_[0-9a-f]{64}/.exec(curlLine)?.[0]}` },
        })
        const statuses = new Set(
          ((await appointments.json()) as { data: { status: string }[] }).data.map((a) => a.status),
        )
        expect(statuses.size).toBeGreaterThanOrEqual(3)
      } finally {
        server.child.kill('SIGTERM')
      }
      expect(await server.exited()).toBe(0)

      // A second start over the same data prints no new key.
      const again = start('node', ['dist/server.js'], cleanEnv({ DATA_DIR: dataDir, PORT: String(port) }))
      await again.waitFor(/Server listening/)
      expect(again.output()).not.toContain('svc_test_')
      again.child.kill('SIGINT')
      expect(await again.exited()).toBe(0)
    },
    patience(60_000),
  )

  it(
    'npm start passes SIGTERM on to the server, which exits 0',
    async () => {
      const port = await freePort()
      // Migrated already: the first start (PGlite's initdb) is the test above's.
      const { dir } = migratedDataDir()
      dirs.push(dir)
      const server = start(
        'npm',
        ['start', '--silent'],
        cleanEnv({ DATA_DIR: dir, PORT: String(port), LOG_LEVEL: 'warn' }),
      )
      await server.waitFor(/Try:/)
      // The demo is printed before the listener opens: asked until it answers (a loaded machine takes its time).
      let status = 0
      while (status !== 200) {
        status = await fetch(`http://127.0.0.1:${port}/openapi.json`).then(
          (r) => r.status,
          () => 0,
        )
        if (status !== 200) await new Promise((resolve) => setTimeout(resolve, 100))
      }
      server.child.kill('SIGTERM')
      expect(await server.exited()).toBe(0)
    },
    patience(60_000),
  )

  it.each([
    [{ PORT: 'abc' }, 'PORT'],
    [{ PORT: '70000' }, 'PORT'],
    [{ LOG_LEVEL: 'loud' }, 'LOG_LEVEL'],
    [{ DATABASE_URL: 'mysql://x' }, 'DATABASE_URL'],
    [{ API_KEY_BRAND: 'Bad Brand' }, 'API_KEY_BRAND'],
  ])('a bad setting %j stops the server with one line naming %s', async (env, name) => {
    const server = start('node', ['dist/server.js'], cleanEnv({ DATA_DIR: tempDir(), ...env }))
    expect(await server.exited()).toBe(1)
    const lines = server.output().trim().split('\n')
    expect(lines).toHaveLength(1)
    expect(lines[0]).toContain(name)
  })
})

describe.skipIf(!postgresAvailable())('the server process, PostgreSQL', () => {
  it(
    'refuses to start on an unmigrated database, naming openbook migrate; starts once migrated',
    async () => {
      const database = await createTestDatabase()
      try {
        const port = await freePort()
        const env = cleanEnv({ DATABASE_URL: database.url, PORT: String(port) })
        const refused = start('node', ['dist/server.js'], env)
        expect(await refused.exited()).toBe(1)
        expect(refused.output().trim().split('\n')).toHaveLength(1)
        expect(refused.output()).toContain('openbook migrate')

        const store = createPostgresStore({ connectionString: database.url })
        await migrate(store)
        await store.close()
        const server = start('node', ['dist/server.js'], env)
        await server.waitFor(/Server listening/)
        // Connected as a superuser: one warning recommending a dedicated role.
        expect(
          server
            .output()
            .split('\n')
            .filter((line) => line.includes('privileged role')),
        ).toHaveLength(1)
        const response = await fetch(`http://127.0.0.1:${port}/api/public/v1/customers`)
        expect(response.status).toBe(401)
        server.child.kill('SIGTERM')
        expect(await server.exited()).toBe(0)
      } finally {
        await database.drop()
      }
    },
    patience(60_000),
  )
})
