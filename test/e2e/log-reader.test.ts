import { spawn } from 'node:child_process'
import { setTimeout as sleep } from 'node:timers/promises'
import { describe, expect, it } from 'vitest'
import { patience } from '../../packages/client/test/helpers/patience.js'
import { createPostgresStore } from '../../src/store/postgres/postgres.js'
import { migrate } from '../../src/store/schema/migrate.js'
import { cleanEnv, freePort, ROOT } from '../helpers/process.js'
import { createTestDatabase, postgresAvailable } from '../helpers/stores.js'

/**
 * A log reader that stops reading (a container runtime's log driver that blocks, a full pipe):
 * the server's lines wait in its buffer, up to its bound (src/log-destination.ts,
 * test/unit/log-destination.test.ts), and requests are answered all the same. A synchronous
 * write per line would stop the server at the pipe's first 64 KB.
 */
describe.skipIf(!postgresAvailable())('the server beside a log reader that stops reading', () => {
  it(
    'answers every request while nothing reads its standard output',
    async () => {
      const database = await createTestDatabase()
      const store = createPostgresStore({ connectionString: database.url })
      await migrate(store)
      await store.close()
      const port = await freePort()
      // Standard output is a pipe to a process that never reads it: it fills at 64 KB and stays full.
      const child = spawn('sh', ['-c', 'node dist/server.js | sleep 600'], {
        cwd: ROOT,
        env: cleanEnv({ DATABASE_URL: database.url, PORT: String(port), LOG_LEVEL: 'info' }),
        stdio: ['ignore', 'ignore', 'inherit'],
        detached: true,
      })
      const exited = new Promise((resolve) => child.once('exit', resolve))
      try {
        const url = `http://127.0.0.1:${port}/api/public/v1/customers`
        for (let tries = 0; ; tries++) {
          const answer = await fetch(url).catch(() => undefined)
          if (answer?.status === 401) break
          if (tries > 300) throw new Error('the server did not start')
          await sleep(100)
        }
        // Each request writes a line of about 200 bytes: 3,000 are ten times the pipe's buffer.
        const requests = 3_000
        const statuses: number[] = []
        for (let at = 0; at < requests; at += 50) {
          const batch = await Promise.all(
            Array.from({ length: 50 }, () =>
              fetch(url, { signal: AbortSignal.timeout(5_000) }).then((answer) => answer.status),
            ),
          )
          statuses.push(...batch)
        }
        expect(statuses.filter((status) => status === 401)).toHaveLength(requests)
      } finally {
        if (child.pid !== undefined) process.kill(-child.pid, 'SIGKILL')
        await exited
        await database.drop()
      }
    },
    patience(120_000),
  )
})
