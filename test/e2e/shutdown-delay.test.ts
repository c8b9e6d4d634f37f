import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { patience } from '../../packages/client/test/helpers/patience.js'
import { cleanEnv, freePort, start } from '../helpers/process.js'
import { createTestDatabase, postgresAvailable, type TestDatabase } from '../helpers/stores.js'

/**
 * SHUTDOWN_DELAY_MS stays 0 by default (a server run by hand stops at once), and a drain without
 * it behind something that polls /readyz, a load balancer, says so.
 */
describe.skipIf(!postgresAvailable())('SIGTERM with SHUTDOWN_DELAY_MS unset', () => {
  let database: TestDatabase
  beforeAll(async () => {
    database = await createTestDatabase({ migrated: true })
  })
  afterAll(async () => {
    await database?.drop()
  })

  async function drain(pollReadyz: boolean): Promise<string> {
    const [port, opsPort] = [await freePort(), await freePort()]
    const server = start(
      'node',
      ['dist/server.js'],
      cleanEnv({ DATABASE_URL: database.url, PORT: String(port), OPS_PORT: String(opsPort) }),
    )
    await server.waitFor(/operations listener \(healthz, readyz, metrics\) ready/)
    if (pollReadyz) expect((await fetch(`http://127.0.0.1:${opsPort}/readyz`)).status).toBe(200)
    // The other probe says nothing of a balancer: liveness checks call it too.
    expect((await fetch(`http://127.0.0.1:${opsPort}/healthz`)).status).toBe(200)
    server.child.kill('SIGTERM')
    expect(await server.exited(), server.output()).toBe(0)
    return server.output()
  }

  it(
    'warns, in one line, when /readyz was polled',
    async () => {
      const warnings = (await drain(true)).split('\n').filter((line) => line.includes('SHUTDOWN_DELAY_MS'))
      expect(warnings).toHaveLength(1)
      expect(JSON.parse(warnings[0] ?? '{}')).toMatchObject({
        level: 40,
        msg: expect.stringMatching(/^SHUTDOWN_DELAY_MS is 0 and \/readyz is being polled: /),
      })
    },
    patience(60_000),
  )

  it(
    'says nothing when nothing polled it',
    async () => {
      expect(await drain(false)).not.toContain('SHUTDOWN_DELAY_MS')
    },
    patience(60_000),
  )
})
