import { setTimeout as sleep } from 'node:timers/promises'
import pg from 'pg'
import { afterAll, describe, expect, it } from 'vitest'
import { patience } from '../../packages/client/test/helpers/patience.js'
import { cleanEnv, freePort, start } from '../helpers/process.js'
import { createTestDatabase, postgresAvailable, type TestDatabase } from '../helpers/stores.js'

// The background fold needs one grant of the schema (EXECUTE on list_fold_pending() to
// openbook_reader). Revoked, the server still starts and serves, /readyz stays 200, and its log
// names the GRANT once; granted again, the folds run again without a restart.

describe.skipIf(!postgresAvailable())('the server without its fold grant (PostgreSQL)', () => {
  let database: TestDatabase | undefined
  afterAll(async () => {
    await database?.drop()
  })

  const asOwner = async (sql: string) => {
    const client = new pg.Client({ connectionString: database?.url })
    await client.connect()
    try {
      await client.query(sql)
    } finally {
      await client.end()
    }
  }

  it(
    'serves and stays ready, says once what to grant, and folds again once granted',
    async () => {
      database = await createTestDatabase({ migrated: true })
      await asOwner('REVOKE EXECUTE ON FUNCTION list_fold_pending() FROM openbook_reader')
      const port = await freePort()
      const opsPort = await freePort()
      const server = start(
        'node',
        ['dist/server.js'],
        cleanEnv({
          DATABASE_URL: database.url,
          PORT: String(port),
          OPS_PORT: String(opsPort),
          LIST_FOLD_INTERVAL_MS: '100',
        }),
      )
      try {
        await server.waitFor(/GRANT EXECUTE ON FUNCTION list_fold_pending\(\) TO openbook_reader/)
        await server.waitFor(/operations listener \(healthz, readyz, metrics\) ready/)
        expect((await fetch(`http://127.0.0.1:${opsPort}/readyz`)).status).toBe(200)
        expect((await fetch(`http://127.0.0.1:${port}/api/public/v1/customers`)).status).toBe(401)
        // Many folds refused meanwhile, one line.
        await sleep(1_000)
        const metrics = await (await fetch(`http://127.0.0.1:${opsPort}/metrics`)).text()
        expect(Number(/^openbook_list_fold_failures_total (\d+)$/m.exec(metrics)?.[1])).toBeGreaterThan(3)
        expect(metrics).toMatch(/^openbook_list_pending_changes Nan$/im)
        expect(server.output().match(/lacks EXECUTE on list_fold_pending/g)).toHaveLength(1)
        await asOwner('GRANT EXECUTE ON FUNCTION list_fold_pending() TO openbook_reader')
        await server.waitFor(/list folds: running again/)
      } finally {
        server.child.kill('SIGTERM')
      }
      expect(await server.exited(), server.output()).toBe(0)
    },
    patience(60_000),
  )
})
