import { spawn } from 'node:child_process'
import { setTimeout as sleep } from 'node:timers/promises'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { patience } from '../../packages/client/test/helpers/patience.js'
import { FIRST_LOAD_MIN_ROWS } from '../../src/import/loader.js'
import { createPostgresStore } from '../../src/store/postgres/postgres.js'
import { createKey, createOrg } from '../helpers/fixtures.js'
import { cleanEnv, freePort, ROOT, start } from '../helpers/process.js'
import { createTestDatabase, postgresAvailable, type TestDatabase } from '../helpers/stores.js'

/**
 * A large first import on PostgreSQL (empty tables, a chunk big enough for the bulk path) must not
 * stall other organizations: they keep getting fast, correct, empty pages while it runs.
 */
describe.skipIf(!postgresAvailable())('a first load on PostgreSQL beside other organizations', () => {
  let database: TestDatabase
  let key: string
  beforeAll(async () => {
    database = await createTestDatabase({ migrated: true })
    const store = createPostgresStore({ connectionString: database.url })
    ;({ key } = await createKey(store, await createOrg(store, 'org_quiet')))
    await store.close()
  })
  afterAll(async () => {
    await database?.drop()
  })

  it(
    'other organizations read empty pages at once while the load holds its transaction open',
    async () => {
      const port = await freePort()
      const server = start(
        'node',
        ['dist/server.js'],
        cleanEnv({ DATABASE_URL: database.url, PORT: String(port) }),
      )
      await server.waitFor(/Server listening/)
      const importing = spawn('node', ['bin/openbook.js', 'import', '-'], {
        cwd: ROOT,
        env: cleanEnv({ DATABASE_URL: database.url }),
      })
      let stderr = ''
      importing.stderr.on('data', (chunk: Buffer) => {
        stderr += chunk.toString()
      })
      const exited = new Promise<number | null>((resolve) => importing.once('close', resolve))
      try {
        // More than one chunk (25,000 lines) of a new organization's customers; the input stays open.
        let text = `${JSON.stringify({ type: 'organization', id: 'org_big', name: 'Big', plan: 'enterprise' })}\n`
        for (let i = 0; i < FIRST_LOAD_MIN_ROWS * 3; i++)
          text += `${JSON.stringify({ type: 'customer', id: `cus_${i}`, orgId: 'org_big', isActive: true, createdAt: '2025-01-01T00:00:00Z', updatedAt: '2025-01-01T00:00:00Z' })}\n`
        importing.stdin.write(text)
        await sleep(4_000)
        for (const path of ['customers', 'appointments', 'appointments?status=completed']) {
          const started = Date.now()
          const response = await fetch(`http://127.0.0.1:${port}/api/public/v1/${path}`, {
            headers: { authorization: `Bearer ${key}` },
          })
          expect(response.status, path).toBe(200)
          expect(((await response.json()) as { pagination: { total: number } }).pagination.total).toBe(0)
          expect(Date.now() - started, path).toBeLessThan(1_000)
        }
        importing.stdin.end()
        expect(await exited, stderr).toBe(0)
      } finally {
        importing.kill('SIGKILL')
        server.child.kill('SIGTERM')
        await server.exited()
      }
    },
    patience(90_000),
  )
})
